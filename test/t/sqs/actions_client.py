"""SQS actions over HTTP with boto3 (Query protocol in Debian's 1.26), for
test/t/025_sqs_actions.pl.

    python3 actions_client.py <endpoint> <key> <secret> <phase>

Prints one line per check, "ok<TAB>name" or "not ok<TAB>name<TAB>detail",
and "value<TAB>name<TAB>text" for what the Perl side needs; the Perl test
turns each check into an assertion.  Phases: main (every action's happy
path and SQS's errors), from_sql (receive what SQL sent), to_sql (send what
SQL receives), rate_limit (a rate limit over the wire).  MD5s are recomputed here (botocore 1.29 does not check
them).
"""
import base64
import hashlib
import json
import struct
import sys
import threading
import time
import urllib.request
import uuid

import botocore
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves it out
from tap_lines import ACCOUNT, REGION, check, queue_arn, queue_url, sqs_client, value  # noqa: E402
ENDPOINT, KEY, SECRET, PHASE = sys.argv[1:5]
sqs = sqs_client(ENDPOINT, KEY, SECRET)


def url(name):
    return queue_url(ENDPOINT, name)


def arn(name):
    return queue_arn(name)


def error_code(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except botocore.exceptions.ClientError as e:
        return e.response['Error']['Code']
    return None


def is_uuid(s):
    try:
        return str(uuid.UUID(s)) == s
    except (TypeError, ValueError):
        return False


def md5(data):
    return hashlib.md5(data).hexdigest()


def md5_attrs(attrs):
    """REFERENCE.md 1.7: sorted by name, length-prefixed fields."""
    buf = b''
    for name in sorted(attrs):
        v = attrs[name]
        t = v['DataType']
        buf += struct.pack('!I', len(name.encode())) + name.encode()
        buf += struct.pack('!I', len(t.encode())) + t.encode()
        if t.startswith('Binary'):
            b = v['BinaryValue']
            buf += b'\x02' + struct.pack('!I', len(b)) + b
        else:
            s = v['StringValue'].encode()
            buf += b'\x01' + struct.pack('!I', len(s)) + s
    return md5(buf)


def json_call(action, payload):
    """An AWS JSON 1.0 request, signed: for the actions boto3 1.26 lacks."""
    body = json.dumps(payload).encode()
    req = AWSRequest(method='POST', url=ENDPOINT + '/', data=body, headers={
        'Content-Type': 'application/x-amz-json-1.0',
        'X-Amz-Target': 'AmazonSQS.' + action})
    SigV4Auth(Credentials(KEY, SECRET), 'sqs', REGION).add_auth(req)
    r = urllib.request.Request(ENDPOINT + '/', data=body, method='POST',
                               headers=dict(req.headers.items()))
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b'{}')
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b'{}')


def main():
    # ---- queues: create, idempotency, attributes
    attrs = {'VisibilityTimeout': '45', 'DelaySeconds': '0',
             'MessageRetentionPeriod': '3600', 'MaximumMessageSize': '2048',
             'ReceiveMessageWaitTimeSeconds': '0'}
    r = sqs.create_queue(QueueName='act_std', Attributes=attrs, tags={'team': 'core'})
    check('create standard queue: its url', r['QueueUrl'] == url('act_std'), r)
    r = sqs.create_queue(QueueName='act_std', Attributes=attrs)
    check('create again, same attributes: same url', r['QueueUrl'] == url('act_std'), r)
    code = error_code(sqs.create_queue, QueueName='act_std',
                      Attributes=dict(attrs, VisibilityTimeout='46'))
    check('create again, other attributes: QueueNameExists',
          code in ('QueueAlreadyExists', 'QueueNameExists'), code)
    check('queue name with a dot: InvalidParameterValue',
          error_code(sqs.create_queue, QueueName='a.b') == 'InvalidParameterValue')
    check('.fifo name without FifoQueue: InvalidParameterValue',
          error_code(sqs.create_queue, QueueName='act_bad.fifo') == 'InvalidParameterValue')
    check('FifoQueue without .fifo: InvalidParameterValue',
          error_code(sqs.create_queue, QueueName='act_bad',
                     Attributes={'FifoQueue': 'true'}) == 'InvalidParameterValue')
    q = url('act_std')
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['All'])['Attributes']
    check('attributes round trip',
          all(a.get(k) == v for k, v in attrs.items()), a)
    check('QueueArn', a.get('QueueArn') == arn('act_std'), a)
    check('ApproximateNumberOfMessages 0', a.get('ApproximateNumberOfMessages') == '0', a)
    check('CreatedTimestamp is now',
          abs(int(a.get('CreatedTimestamp', '0')) - time.time()) < 600, a)
    check('standard queue: no FifoQueue attribute', 'FifoQueue' not in a, a)
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['VisibilityTimeout'])['Attributes']
    check('only the attributes asked for', a == {'VisibilityTimeout': '45'}, a)
    sqs.set_queue_attributes(QueueUrl=q, Attributes={'VisibilityTimeout': '60',
                                                     'ReceiveMessageWaitTimeSeconds': '1'})
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['All'])['Attributes']
    check('set attributes', a['VisibilityTimeout'] == '60' and
          a['ReceiveMessageWaitTimeSeconds'] == '1' and a['DelaySeconds'] == '0', a)
    sqs.set_queue_attributes(QueueUrl=q, Attributes={'ReceiveMessageWaitTimeSeconds': '0'})
    check('unknown attribute: InvalidAttributeName',
          error_code(sqs.set_queue_attributes, QueueUrl=q,
                     Attributes={'Colour': '1'}) == 'InvalidAttributeName')
    check('DelaySeconds 901: InvalidAttributeValue',
          error_code(sqs.set_queue_attributes, QueueUrl=q,
                     Attributes={'DelaySeconds': '901'}) == 'InvalidAttributeValue')
    check('get_queue_url', sqs.get_queue_url(QueueName='act_std')['QueueUrl'] == q)
    code = error_code(sqs.get_queue_url, QueueName='act_none')
    check('get_queue_url of no queue: QueueDoesNotExist',
          code in ('AWS.SimpleQueueService.NonExistentQueue', 'QueueDoesNotExist'), code)
    check('a bare queue name as QueueUrl',
          'Attributes' in sqs.get_queue_attributes(QueueUrl='act_std',
                                                   AttributeNames=['QueueArn']))

    # ---- messages: send, receive, delete, with attributes of every type
    mattrs = {'s': {'DataType': 'String', 'StringValue': 'héllo'},
              'n': {'DataType': 'Number', 'StringValue': '42.5'},
              'b': {'DataType': 'Binary', 'BinaryValue': b'\x00\x01\xff'},
              'c': {'DataType': 'String.custom', 'StringValue': 'x'}}
    body = 'hello \u00e9 \U0001F600'
    r = sqs.send_message(QueueUrl=q, MessageBody=body, MessageAttributes=mattrs)
    check('send: MD5OfMessageBody', r.get('MD5OfMessageBody') == md5(body.encode()), r)
    check('send: MD5OfMessageAttributes',
          r.get('MD5OfMessageAttributes') == md5_attrs(mattrs), r)
    check('send: MessageId is a UUID', is_uuid(r.get('MessageId')), r)
    check('send: no SequenceNumber on a standard queue', 'SequenceNumber' not in r, r)
    sent_id = r['MessageId']
    r = sqs.receive_message(QueueUrl=q, AttributeNames=['All'],
                            MessageAttributeNames=['All'], MaxNumberOfMessages=10)
    msgs = r.get('Messages', [])
    check('receive: one message', len(msgs) == 1, r)
    m = msgs[0]
    check('receive: id and body', m['MessageId'] == sent_id and m['Body'] == body, m)
    check('receive: MD5OfBody', m['MD5OfBody'] == md5(body.encode()), m)
    check('receive: attributes as sent', m.get('MessageAttributes') == mattrs, m)
    check('receive: MD5OfMessageAttributes', m.get('MD5OfMessageAttributes') == md5_attrs(mattrs), m)
    sa = m.get('Attributes', {})
    check('receive: system attributes',
          sa.get('ApproximateReceiveCount') == '1' and sa.get('SenderId') == 'sqs_app'
          and abs(int(sa.get('SentTimestamp', '0')) / 1000 - time.time()) < 600
          and 'ApproximateFirstReceiveTimestamp' in sa, sa)
    sqs.delete_message(QueueUrl=q, ReceiptHandle=m['ReceiptHandle'])
    check('delete', sqs.receive_message(QueueUrl=q).get('Messages') is None)
    check('delete again with the same receipt: success',
          error_code(sqs.delete_message, QueueUrl=q, ReceiptHandle=m['ReceiptHandle']) is None)
    check('forged receipt: ReceiptHandleIsInvalid',
          error_code(sqs.delete_message, QueueUrl=q, ReceiptHandle='garbage') == 'ReceiptHandleIsInvalid')
    check('body with a control character: InvalidMessageContents',
          error_code(sqs.send_message, QueueUrl=q, MessageBody='a\x01b') == 'InvalidMessageContents')
    check('DelaySeconds 901: InvalidParameterValue',
          error_code(sqs.send_message, QueueUrl=q, MessageBody='x',
                     DelaySeconds=901) == 'InvalidParameterValue')
    check('attribute name AWS.x: InvalidParameterValue',
          error_code(sqs.send_message, QueueUrl=q, MessageBody='x', MessageAttributes={
              'AWS.x': {'DataType': 'String', 'StringValue': 'v'}}) == 'InvalidParameterValue')
    sqs.send_message(
        QueueUrl=q, MessageBody='filtered', MessageAttributes={
            'app.a': {'DataType': 'String', 'StringValue': '1'},
            'app.b': {'DataType': 'Number', 'StringValue': '2'},
            'other': {'DataType': 'String', 'StringValue': '3'}})
    m = sqs.receive_message(QueueUrl=q, MessageAttributeNames=['app.*'])['Messages'][0]
    want = {'app.a': {'DataType': 'String', 'StringValue': '1'},
            'app.b': {'DataType': 'Number', 'StringValue': '2'}}
    check('MessageAttributeNames prefix.*: only those, and their MD5',
          m.get('MessageAttributes') == want and m.get('MD5OfMessageAttributes') == md5_attrs(want), m)
    check('no AttributeNames: no system attributes', 'Attributes' not in m, m)

    # ---- visibility
    sqs.change_message_visibility(QueueUrl=q, ReceiptHandle=m['ReceiptHandle'], VisibilityTimeout=0)
    m2 = sqs.receive_message(QueueUrl=q, AttributeNames=['ApproximateReceiveCount'],
                             VisibilityTimeout=1)['Messages'][0]
    check('change visibility 0: received again', m2['MessageId'] == m['MessageId'] and
          m2['Attributes']['ApproximateReceiveCount'] == '2', m2)
    check('old receipt after a new receive: InvalidParameterValue (SQS)',
          error_code(sqs.change_message_visibility, QueueUrl=q, ReceiptHandle=m['ReceiptHandle'],
                     VisibilityTimeout=5) == 'InvalidParameterValue')
    time.sleep(1.5)
    code = error_code(sqs.change_message_visibility, QueueUrl=q,
                      ReceiptHandle=m2['ReceiptHandle'], VisibilityTimeout=5)
    check('lease ended, latest receipt: leased again, as SQS does', code is None, code)
    check('... so it is not received meanwhile',
          not sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10).get('Messages'))
    sqs.change_message_visibility(QueueUrl=q, ReceiptHandle=m2['ReceiptHandle'], VisibilityTimeout=0)
    check('VisibilityTimeout 43201: InvalidParameterValue',
          error_code(sqs.receive_message, QueueUrl=q, VisibilityTimeout=43201) == 'InvalidParameterValue')
    check('WaitTimeSeconds 21: InvalidParameterValue',
          error_code(sqs.receive_message, QueueUrl=q, WaitTimeSeconds=21) == 'InvalidParameterValue')
    check('MaxNumberOfMessages 11: InvalidParameterValue',
          error_code(sqs.receive_message, QueueUrl=q, MaxNumberOfMessages=11) == 'InvalidParameterValue')
    sqs.purge_queue(QueueUrl=q)
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['ApproximateNumberOfMessages',
                                                            'ApproximateNumberOfMessagesNotVisible'])
    check('purge: nothing left', a['Attributes'] == {'ApproximateNumberOfMessages': '0',
                                                     'ApproximateNumberOfMessagesNotVisible': '0'}, a)

    # ---- batches, one entry failing
    r = sqs.send_message_batch(QueueUrl=q, Entries=[
        {'Id': 'ok1', 'MessageBody': 'b1'},
        {'Id': 'bad', 'MessageBody': 'b\x01'},
        {'Id': 'ok2', 'MessageBody': 'b2', 'DelaySeconds': 0,
         'MessageAttributes': {'k': {'DataType': 'String', 'StringValue': 'v'}}}])
    ok = {e['Id']: e for e in r.get('Successful', [])}
    check('send batch: two sent', sorted(ok) == ['ok1', 'ok2'], r)
    check('send batch: MD5s', ok.get('ok1', {}).get('MD5OfMessageBody') == md5(b'b1') and
          ok.get('ok2', {}).get('MD5OfMessageAttributes') ==
          md5_attrs({'k': {'DataType': 'String', 'StringValue': 'v'}}), r)
    f = r.get('Failed', [])
    check('send batch: the bad entry failed alone',
          len(f) == 1 and f[0]['Id'] == 'bad' and f[0]['SenderFault'] is True and
          f[0]['Code'] == 'InvalidMessageContents', f)
    code = error_code(sqs.send_message_batch, QueueUrl=q,
                      Entries=[{'Id': 'e%d' % i, 'MessageBody': 'x'} for i in range(11)])
    check('11 entries: TooManyEntriesInBatchRequest',
          code == 'AWS.SimpleQueueService.TooManyEntriesInBatchRequest', code)
    code = error_code(sqs.send_message_batch, QueueUrl=q,
                      Entries=[{'Id': 'same', 'MessageBody': 'x'}] * 2)
    check('repeated ids: BatchEntryIdsNotDistinct',
          code == 'AWS.SimpleQueueService.BatchEntryIdsNotDistinct', code)
    code = error_code(sqs.send_message_batch, QueueUrl=q,
                      Entries=[{'Id': 'a b', 'MessageBody': 'x'}])
    check('bad entry id: InvalidBatchEntryId',
          code == 'AWS.SimpleQueueService.InvalidBatchEntryId', code)
    msgs = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, VisibilityTimeout=30).get('Messages', [])
    check('receive the batch', sorted(m['Body'] for m in msgs) == ['b1', 'b2'], msgs)
    r = sqs.change_message_visibility_batch(QueueUrl=q, Entries=[
        {'Id': 'c1', 'ReceiptHandle': msgs[0]['ReceiptHandle'], 'VisibilityTimeout': 40},
        {'Id': 'c2', 'ReceiptHandle': 'forged', 'VisibilityTimeout': 40}])
    check('change visibility batch: one ok, one ReceiptHandleIsInvalid',
          [e['Id'] for e in r.get('Successful', [])] == ['c1'] and
          [(e['Id'], e['Code']) for e in r.get('Failed', [])] == [('c2', 'ReceiptHandleIsInvalid')], r)
    r = sqs.delete_message_batch(QueueUrl=q, Entries=[
        {'Id': 'd%d' % i, 'ReceiptHandle': m['ReceiptHandle']} for i, m in enumerate(msgs)] +
        [{'Id': 'dx', 'ReceiptHandle': 'forged'}])
    check('delete batch: two ok, one ReceiptHandleIsInvalid',
          sorted(e['Id'] for e in r.get('Successful', [])) == ['d0', 'd1'] and
          [(e['Id'], e['Code']) for e in r.get('Failed', [])] == [('dx', 'ReceiptHandleIsInvalid')], r)

    # ---- FIFO: order, dedup, sequence numbers
    r = sqs.create_queue(QueueName='act_fifo.fifo', Attributes={
        'FifoQueue': 'true', 'ContentBasedDeduplication': 'true'})
    fq = r['QueueUrl']
    check('create FIFO queue', fq == url('act_fifo.fifo'), r)
    a = sqs.get_queue_attributes(QueueUrl=fq, AttributeNames=['All'])['Attributes']
    check('FIFO attributes', a.get('FifoQueue') == 'true' and
          a.get('ContentBasedDeduplication') == 'true' and
          a.get('DeduplicationScope') == 'queue' and a.get('FifoThroughputLimit') == 'perQueue', a)
    r1 = sqs.send_message(QueueUrl=fq, MessageBody='f1', MessageGroupId='g',
                          MessageDeduplicationId='d1')
    r2 = sqs.send_message(QueueUrl=fq, MessageBody='f1 again', MessageGroupId='g',
                          MessageDeduplicationId='d1')
    check('dedup: the original MessageId', r1['MessageId'] == r2['MessageId'], (r1, r2))
    check('FIFO send: SequenceNumber of 20 digits',
          r1.get('SequenceNumber', '').isdigit() and len(r1['SequenceNumber']) >= 20, r1)
    good = [{'Id': 'x%d' % i, 'MessageBody': 'f%d' % i, 'MessageGroupId': 'g'} for i in range(2, 6)]
    code = error_code(sqs.send_message_batch, QueueUrl=fq,
                      Entries=good + [{'Id': 'nogroup', 'MessageBody': 'f9'}])
    check('FIFO batch: an entry without group fails the whole batch, as SQS (InvalidParameterValue)',
          code == 'InvalidParameterValue', code)
    r = sqs.send_message_batch(QueueUrl=fq, Entries=good)
    check('FIFO batch: the others, sent alone, go',
          len(r.get('Successful', [])) == 4 and not r.get('Failed'), r)
    code = error_code(sqs.send_message, QueueUrl=fq, MessageBody='x', MessageGroupId='g',
                      DelaySeconds=5)
    check('FIFO per-message delay: InvalidParameterValue', code == 'InvalidParameterValue', code)
    msgs = sqs.receive_message(QueueUrl=fq, MaxNumberOfMessages=10,
                               AttributeNames=['MessageGroupId', 'SequenceNumber',
                                               'MessageDeduplicationId'])['Messages']
    check('FIFO order', [m['Body'] for m in msgs] == ['f1', 'f2', 'f3', 'f4', 'f5'], msgs)
    seqs = [int(m['Attributes']['SequenceNumber']) for m in msgs]
    check('FIFO sequence numbers rise', seqs == sorted(seqs) and
          msgs[0]['Attributes'].get('MessageGroupId') == 'g' and
          msgs[0]['Attributes'].get('MessageDeduplicationId') == 'd1', msgs)
    sqs.delete_message_batch(QueueUrl=fq, Entries=[
        {'Id': str(i), 'ReceiptHandle': m['ReceiptHandle']} for i, m in enumerate(msgs)])

    # ---- dead letters, ListDeadLetterSourceQueues, move tasks
    sqs.create_queue(QueueName='act_dlq')
    policy = json.dumps({'deadLetterTargetArn': arn('act_dlq'), 'maxReceiveCount': 1})
    sq = sqs.create_queue(QueueName='act_src', Attributes={'RedrivePolicy': policy})['QueueUrl']
    a = sqs.get_queue_attributes(QueueUrl=sq, AttributeNames=['RedrivePolicy'])['Attributes']
    rp = json.loads(a.get('RedrivePolicy', '{}'))
    check('RedrivePolicy round trip', rp == {'deadLetterTargetArn': arn('act_dlq'),
                                             'maxReceiveCount': 1}, a)
    r = sqs.list_dead_letter_source_queues(QueueUrl=url('act_dlq'))
    check('ListDeadLetterSourceQueues', r.get('queueUrls') == [sq], r)
    sqs.set_queue_attributes(QueueUrl=url('act_dlq'), Attributes={
        'RedriveAllowPolicy': json.dumps({'redrivePermission': 'byQueue',
                                          'sourceQueueArns': [arn('act_src')]})})
    a = sqs.get_queue_attributes(QueueUrl=url('act_dlq'), AttributeNames=['RedriveAllowPolicy'])
    check('RedriveAllowPolicy round trip',
          json.loads(a['Attributes'].get('RedriveAllowPolicy', '{}')) ==
          {'redrivePermission': 'byQueue', 'sourceQueueArns': [arn('act_src')]}, a)
    sqs.send_message(QueueUrl=sq, MessageBody='poison')
    m = sqs.receive_message(QueueUrl=sq, VisibilityTimeout=0).get('Messages', [])
    check('dead letter: first receive', len(m) == 1, m)
    m = sqs.receive_message(QueueUrl=sq).get('Messages', [])
    check('dead letter: moved on the next receive', m == [], m)
    m = sqs.receive_message(QueueUrl=url('act_dlq'), VisibilityTimeout=0).get('Messages', [])
    check('dead letter: in the dead-letter queue', [x['Body'] for x in m] == ['poison'], m)
    status, r = json_call('StartMessageMoveTask', {'SourceArn': arn('act_dlq')})
    check('StartMessageMoveTask', status == 200 and 'TaskHandle' in r, (status, r))
    handle = r.get('TaskHandle', 'none')
    # the queue worker runs the task in the background
    for _ in range(100):
        status, r = json_call('ListMessageMoveTasks', {'SourceArn': arn('act_dlq'), 'MaxResults': 10})
        res = r.get('Results', [])
        if res and res[0].get('Status') != 'RUNNING':
            break
        time.sleep(0.1)
    m = sqs.receive_message(QueueUrl=sq).get('Messages', [])
    check('move task: back in its source', [x['Body'] for x in m] == ['poison'], m)
    check('ListMessageMoveTasks', status == 200 and len(res) == 1 and
          res[0].get('Status') == 'COMPLETED' and res[0].get('SourceArn') == arn('act_dlq') and
          res[0].get('ApproximateNumberOfMessagesMoved') == 1, (status, r))
    status, r = json_call('CancelMessageMoveTask', {'TaskHandle': handle})
    check('CancelMessageMoveTask of a completed task: ResourceNotFoundException',
          status in (400, 404) and 'ResourceNotFound' in r.get('__type', ''), (status, r))

    # ---- tags
    check('ListQueueTags', sqs.list_queue_tags(QueueUrl=q).get('Tags') == {'team': 'core'})
    sqs.tag_queue(QueueUrl=q, Tags={'env': 'test'})
    check('TagQueue', sqs.list_queue_tags(QueueUrl=q).get('Tags') == {'team': 'core', 'env': 'test'})
    sqs.untag_queue(QueueUrl=q, TagKeys=['team'])
    check('UntagQueue', sqs.list_queue_tags(QueueUrl=q).get('Tags') == {'env': 'test'})

    # ---- ListQueues: prefix, pages
    for n in ('act_list_a', 'act_list_b', 'act_list_c'):
        sqs.create_queue(QueueName=n)
    r = sqs.list_queues(QueueNamePrefix='act_list_')
    check('ListQueues with a prefix', r.get('QueueUrls') == [url('act_list_a'), url('act_list_b'),
                                                             url('act_list_c')] and
          'NextToken' not in r, r)
    r = sqs.list_queues(QueueNamePrefix='act_list_', MaxResults=2)
    r2 = sqs.list_queues(QueueNamePrefix='act_list_', MaxResults=2,
                         NextToken=r.get('NextToken', ''))
    check('ListQueues pages', r.get('QueueUrls') == [url('act_list_a'), url('act_list_b')] and
          r2.get('QueueUrls') == [url('act_list_c')] and 'NextToken' not in r2, (r, r2))
    check('ListQueues: no match, no QueueUrls',
          'QueueUrls' not in sqs.list_queues(QueueNamePrefix='act_nothing'))
    sqs.delete_queue(QueueUrl=url('act_list_c'))
    code = error_code(sqs.get_queue_url, QueueName='act_list_c')
    check('DeleteQueue', code == 'AWS.SimpleQueueService.NonExistentQueue', code)

    # ---- long polls: empty until the end, and woken by a send
    t0 = time.time()
    r = sqs.receive_message(QueueUrl=q, WaitTimeSeconds=2)
    el = time.time() - t0
    check('long poll on an empty queue waits its time', 'Messages' not in r and 1.8 <= el < 10, el)
    threading.Timer(1.0, lambda: sqs.send_message(QueueUrl=q, MessageBody='wake')).start()
    t0 = time.time()
    r = sqs.receive_message(QueueUrl=q, WaitTimeSeconds=15)
    el = time.time() - t0
    check('long poll woken by a send', [x['Body'] for x in r.get('Messages', [])] == ['wake']
          and el < 10, (el, r))
    sqs.delete_message(QueueUrl=q, ReceiptHandle=r['Messages'][0]['ReceiptHandle'])

    code = error_code(sqs.add_permission, QueueUrl=q, Label='l', AWSAccountIds=['1'],
                      Actions=['SendMessage'])
    check('AddPermission: UnsupportedOperation',
          code == 'AWS.SimpleQueueService.UnsupportedOperation', code)
    sqs.create_queue(QueueName='act_interop')


def from_sql():
    q = url('act_interop')
    r = sqs.receive_message(QueueUrl=q, MessageAttributeNames=['All'])
    m = r.get('Messages', [{}])[0]
    want = {'k': {'DataType': 'String', 'StringValue': 'v'},
            'n': {'DataType': 'Number', 'StringValue': '5'},
            'o': {'DataType': 'String', 'StringValue': '{"x": 1}'}}
    check('sent in SQL, received over HTTP', m.get('Body') == 'from sql', r)
    check('SQL attributes as SQS attributes', m.get('MessageAttributes') == want and
          m.get('MD5OfMessageAttributes') == md5_attrs(want), m)
    value('sql_message_id', m.get('MessageId'))
    sqs.delete_message(QueueUrl=q, ReceiptHandle=m['ReceiptHandle'])


def to_sql():
    r = sqs.send_message(QueueUrl=url('act_interop'), MessageBody='from http',
                         MessageAttributes={'a': {'DataType': 'String', 'StringValue': 'b'}})
    check('sent over HTTP: MD5s', r.get('MD5OfMessageBody') == md5(b'from http') and
          r.get('MD5OfMessageAttributes') ==
          md5_attrs({'a': {'DataType': 'String', 'StringValue': 'b'}}), r)
    value('http_message_id', r['MessageId'])


def rate_limit():
    # act_rate: made in SQL with receive_rate_limit 2 per 2 seconds
    q = url('act_rate')
    sqs.send_message_batch(QueueUrl=q, Entries=[
        {'Id': str(i), 'MessageBody': 'r%d' % i} for i in range(6)])
    r = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)
    check('ReceiveMessage: the queue-wide limit hands out 2 of 6',
          len(r.get('Messages', [])) == 2, r)
    r = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)
    check('ReceiveMessage: then none while the window is closed',
          len(r.get('Messages', [])) == 0, r)
    t0 = time.monotonic()
    r = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, WaitTimeSeconds=10)
    took = time.monotonic() - t0
    check('a long poll is answered when the window opens, with its 2',
          len(r.get('Messages', [])) == 2 and took < 8, (took, r))


def priority():
    # act_prio: one message sent in SQL at priority 1, then one at 9, then
    # two over HTTP (the queue's default_priority, 6)
    q = url('act_prio')
    sqs.send_message_batch(QueueUrl=q, Entries=[
        {'Id': 'a', 'MessageBody': 'http-a'}, {'Id': 'b', 'MessageBody': 'http-b'}])
    got = []
    for _ in range(4):
        r = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=1)
        got += [m['Body'] for m in r.get('Messages', [])]
    check('ReceiveMessage hands out by priority, the default for what came over HTTP',
          got == ['sql-9', 'http-a', 'http-b', 'sql-1'], got)


{'main': main, 'from_sql': from_sql, 'to_sql': to_sql, 'rate_limit': rate_limit,
 'priority': priority}[PHASE]()
