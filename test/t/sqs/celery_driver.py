"""A Celery worker on the SQS endpoint (kombu's SQS transport unchanged:
Debian's python3-celery / python3-kombu 5.2), for test/t/036_sqs_celery.pl.

    python3 celery_driver.py <endpoint> <key> <secret> <workdir>

Runs examples/sqs/celery_app.py's worker on queue celery_t, whose
RedrivePolicy sends a message to celery_t_dlq after 2 receives, then checks
tasks with results, a retry and a poison task ending in the dead-letter
queue.  Prints ok/not ok lines as actions_client.py does.
"""
import json
import os
import subprocess
import sys
import time

import boto3
import botocore

ENDPOINT, KEY, SECRET, WORK = sys.argv[1:5]
# absolute: the worker runs in examples/sqs, and the file result backend
# of newer Celery (5.6, Debian sid's) takes the path as given
WORK = os.path.abspath(WORK)
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..',
                        'examples', 'sqs')
env = dict(os.environ, SQS_ENDPOINT=ENDPOINT, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
           CELERY_RESULT_BACKEND='file://' + os.path.join(WORK, 'results'),
           CELERY_ATTEMPTS_DIR=os.path.join(WORK, 'attempts'),
           CELERY_QUEUE='celery_t', CELERY_VISIBILITY_TIMEOUT='2')
os.makedirs(os.path.join(WORK, 'results'), exist_ok=True)
os.makedirs(os.path.join(WORK, 'attempts'), exist_ok=True)
for k, v in env.items():
    os.environ[k] = v
sys.path.insert(0, EXAMPLES)


def check(name, cond, detail=''):
    if cond:
        print('ok\t%s' % name, flush=True)
    else:
        print('not ok\t%s\t%s' % (name, str(detail).replace('\n', ' ')), flush=True)


sqs = boto3.client('sqs', endpoint_url=ENDPOINT, region_name='us-east-1',
                   aws_access_key_id=KEY, aws_secret_access_key=SECRET)
sqs.create_queue(QueueName='celery_t_dlq')
dlq_arn = sqs.get_queue_attributes(QueueUrl=ENDPOINT + '/000000000000/celery_t_dlq',
                                   AttributeNames=['QueueArn'])['Attributes']['QueueArn']
# as kombu creates it (its VisibilityTimeout), plus the dead-letter queue
sqs.create_queue(QueueName='celery_t', Attributes={
    'VisibilityTimeout': '2',
    'RedrivePolicy': json.dumps({'deadLetterTargetArn': dlq_arn, 'maxReceiveCount': '2'})})

log = open(os.path.join(WORK, 'worker.log'), 'w')
worker = subprocess.Popen(
    [sys.executable, '-I', '-m', 'celery', '-A', 'celery_app', 'worker', '--pool=solo',
     '--loglevel=INFO', '-Q', 'celery_t'],
    cwd=EXAMPLES, env=dict(env, PYTHONPATH=EXAMPLES), stdout=log, stderr=subprocess.STDOUT)
try:
    from celery_app import add, flaky, poison

    results = [add.delay(i, i) for i in range(10)]
    got = [r.get(timeout=60) for r in results]
    check('Celery: ten tasks executed, their results back', got == [2 * i for i in range(10)], got)
    r = flaky.delay('once').get(timeout=60)
    check('Celery: a task retried (self.retry) and then succeeded', r == 'ok after 2 attempts', r)
    poison.delay()
    m = None
    for _ in range(300):
        got = sqs.receive_message(QueueUrl=ENDPOINT + '/000000000000/celery_t_dlq',
                                  AttributeNames=['All'], MessageAttributeNames=['All'],
                                  VisibilityTimeout=0).get('Messages')
        if got:
            m = got[0]
            break
        time.sleep(0.2)
    check('Celery: the poison task\'s message ended in the dead-letter queue', m is not None, m)
    if m is not None:
        body = json.loads(__import__('base64').b64decode(m['Body']))
        check('Celery: it is the poison task\'s message',
              body.get('headers', {}).get('task') == 'celery_app.poison', body.get('headers'))
        check('Celery: with DeadLetterQueueSourceArn and no attribute of ours',
              m['Attributes'].get('DeadLetterQueueSourceArn', '').endswith(':celery_t') and
              'queue.dead_letter' not in m.get('MessageAttributes', {}), m)
finally:
    worker.terminate()
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
    log.close()
text = open(os.path.join(WORK, 'worker.log')).read()
check('Celery: the worker ran and logged no error from the endpoint',
      'ready.' in text and 'ClientError' not in text and 'ReceiptHandleIsInvalid' not in text
      and 'MissingParameter' not in text, text[-2000:])
