"""A Celery application whose broker is the queue extension's SQS endpoint,
through kombu's SQS transport unchanged (Debian's python3-celery and
python3-kombu 5.2, with python3-pycurl, which that transport needs).

    SQS_ENDPOINT=http://127.0.0.1:9324 AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\
        python3 -m celery -A celery_app worker --pool=solo --loglevel=INFO

docs/sqs-api.md shows this configuration; test/t/036_sqs_celery.pl runs a
worker with it (tasks with results, a retry, a dead-letter queue).
"""
import os
import urllib.parse

from celery import Celery

endpoint = urllib.parse.urlsplit(os.environ.get('SQS_ENDPOINT', 'http://127.0.0.1:9324'))
key = urllib.parse.quote(os.environ['AWS_ACCESS_KEY_ID'], safe='')
secret = urllib.parse.quote(os.environ['AWS_SECRET_ACCESS_KEY'], safe='')

app = Celery('celery_app')
app.conf.update(
    # sqs://key:secret@host:port, plain HTTP (is_secure False) to the endpoint
    broker_url='sqs://%s:%s@%s' % (key, secret, endpoint.netloc),
    broker_transport_options={
        'region': 'us-east-1',       # any region name: it appears in ARNs only
        'is_secure': endpoint.scheme == 'https',
        'visibility_timeout': int(os.environ.get('CELERY_VISIBILITY_TIMEOUT', '60')),
        'wait_time_seconds': 10,     # long polling, parked by the endpoint
        'polling_interval': 1,
    },
    # results are not the broker's business: any backend (here files)
    result_backend=os.environ.get('CELERY_RESULT_BACKEND', 'file:///tmp/celery-results'),
    task_default_queue=os.environ.get('CELERY_QUEUE', 'celery'),
    worker_enable_remote_control=False,   # SQS has no broadcast: no pidbox queues
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)

ATTEMPTS_DIR = os.environ.get('CELERY_ATTEMPTS_DIR', '/tmp')


@app.task
def add(x, y):
    return x + y


@app.task(bind=True, max_retries=3)
def flaky(self, name):
    """Fails its first attempt, then succeeds: a retry through the queue."""
    path = os.path.join(ATTEMPTS_DIR, 'flaky-%s' % name)
    with open(path, 'a') as f:
        f.write('x')
    with open(path) as f:
        attempts = len(f.read())
    if attempts < 2:
        raise self.retry(countdown=1, exc=RuntimeError('first attempt fails'))
    return 'ok after %d attempts' % attempts


# A poison task: with acks_late and no ack on failure, its message is left
# to the queue, received again after the visibility timeout, and moved to
# the dead-letter queue after the RedrivePolicy's maxReceiveCount.
@app.task(acks_late=True, acks_on_failure_or_timeout=False)
def poison():
    raise RuntimeError('poison')
