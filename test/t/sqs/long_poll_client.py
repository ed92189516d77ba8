"""Long polls over HTTP with boto3, for test/t/023_sqs_server.pl.

    python3 long_poll_client.py <endpoint> <key> <secret> <mode> <queue> [args]

Modes (one line of output each):
    create            CreateQueue; prints the queue URL
    wait SECS         one ReceiveMessage, WaitTimeSeconds=SECS; prints
                      "<messages received>\t<seconds taken>"
    abandon           one ReceiveMessage, WaitTimeSeconds=20, given up by
                      the client after 1 s (it closes its socket); prints
                      "gave up" or what came back
    many N SECS       N ReceiveMessage at once, WaitTimeSeconds=SECS, each
                      on its own connection; prints "<answered>\t<messages>
                      \t<longest seconds>"
"""
import sys
import threading
import time

import boto3
import botocore

ENDPOINT, KEY, SECRET, MODE, QUEUE = sys.argv[1:6]
ARGS = sys.argv[6:]


def client(read_timeout=60):
    return boto3.client('sqs', endpoint_url=ENDPOINT, region_name='us-east-1',
                        aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                        config=botocore.config.Config(retries={'max_attempts': 1},
                                                      read_timeout=read_timeout,
                                                      max_pool_connections=4))


URL = '%s/000000000000/%s' % (ENDPOINT, QUEUE)

if MODE == 'create':
    print(client().create_queue(QueueName=QUEUE)['QueueUrl'])
elif MODE == 'wait':
    start = time.time()
    r = client().receive_message(QueueUrl=URL, WaitTimeSeconds=int(ARGS[0]),
                                 MaxNumberOfMessages=1)
    print('%d\t%.2f' % (len(r.get('Messages', [])), time.time() - start))
elif MODE == 'abandon':
    try:
        r = client(read_timeout=1).receive_message(QueueUrl=URL, WaitTimeSeconds=20,
                                                   MaxNumberOfMessages=1)
        print('answered %r' % r.get('Messages'))
    except botocore.exceptions.ReadTimeoutError:
        print('gave up')
elif MODE == 'many':
    n, secs = int(ARGS[0]), int(ARGS[1])
    results = []
    lock = threading.Lock()

    clients = [client() for _ in range(n)]

    def one(c):
        start = time.time()
        try:
            r = c.receive_message(QueueUrl=URL, WaitTimeSeconds=secs,
                                  MaxNumberOfMessages=1)
            got = len(r.get('Messages', []))
        except Exception as e:  # counted as unanswered
            got = None
        with lock:
            results.append((got, time.time() - start))

    threads = [threading.Thread(target=one, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    answered = [r for r in results if r[0] is not None]
    print('%d\t%d\t%.2f' % (len(answered), sum(r[0] for r in answered),
                            max(r[1] for r in results)))
