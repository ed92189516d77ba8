"""What real SQS clients rely on (issue 36, REFERENCE.md 1.7 "What real
clients rely on"), for test/t/034_sqs_compat.pl, with Debian's boto3 1.26
(Query protocol) and raw signed requests where a client's own form matters.

    python3 compat_client.py <endpoint> <key> <secret> <phase>

Prints "ok<TAB>name", "not ok<TAB>name<TAB>detail" and "value<TAB>name<TAB>
text" lines, as actions_client.py does.  Phases: main (every item below),
public_url (queue URLs after queue.sqs_public_url is set).
"""
import http.client
import json
import sys
import time
import urllib.parse
import uuid

import boto3
import botocore
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves it out
from tap_lines import ACCOUNT, REGION, check, queue_arn, queue_url, sqs_client, value  # noqa: E402
ENDPOINT, KEY, SECRET, PHASE = sys.argv[1:5]
HOST = urllib.parse.urlparse(ENDPOINT).netloc
sqs = sqs_client(ENDPOINT, KEY, SECRET)


def url(name):
    return queue_url(ENDPOINT, name)


def arn(name):
    return queue_arn(name)


def error(fn, *args, **kwargs):
    """(code, message) of the error fn raises, or (None, None)."""
    try:
        fn(*args, **kwargs)
    except botocore.exceptions.ClientError as e:
        return e.response['Error'].get('Code'), e.response['Error'].get('Message')
    return None, None


def is_uuid(s):
    try:
        return str(uuid.UUID(s)) == s
    except (TypeError, ValueError):
        return False


def raw(path, params, headers=None):
    """A signed form-encoded POST to path: (status, body text)."""
    body = urllib.parse.urlencode(params).encode()
    h = {'Host': HOST, 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8'}
    h.update(headers or {})
    req = AWSRequest(method='POST', url='http://%s%s' % (HOST, path), data=body, headers=h)
    SigV4Auth(Credentials(KEY, SECRET), 'sqs', REGION).add_auth(req)
    conn = http.client.HTTPConnection(HOST, timeout=30)
    conn.request('POST', path, body=body, headers=dict(req.headers.items()))
    r = conn.getresponse()
    data = r.read().decode('utf-8', 'replace')
    conn.close()
    return r.status, data


def item1_path_and_protocol():
    q = sqs.create_queue(QueueName='c_path')['QueueUrl']
    path = '/%s/c_path' % ACCOUNT
    st, body = raw(path, {'Action': 'SendMessage', 'Version': '2012-11-05',
                          'MessageBody': 'by path'})
    check('1: SendMessage posted to the queue URL, no QueueUrl: 200',
          st == 200 and '<SendMessageResponse' in body, (st, body))
    # kombu's ReceiveMessage, as kombu 5.2 sends it
    st, body = raw(path, {'Action': 'ReceiveMessage', 'Version': '2012-11-05',
                          'MaxNumberOfMessages': '1', 'WaitTimeSeconds': '1',
                          'AttributeName.1': 'ApproximateReceiveCount'})
    check('1: ReceiveMessage posted to the queue URL (kombu): the message',
          st == 200 and '<Body>by path</Body>' in body, (st, body))
    # Amazon::SQS::Simple: X-Amz-Target with a Query body is Query
    st, body = raw(path, {'Action': 'SendMessage', 'Version': '2012-11-05',
                          'MessageBody': 'with target'},
                   {'X-Amz-Target': 'AmazonSQSv20121105.SendMessage'})
    check('1: X-Amz-Target with a form body is answered in Query XML',
          st == 200 and body.startswith('<?xml') and '<SendMessageResponse' in body, (st, body))
    st, body = raw('/', {'Action': 'SendMessage', 'Version': '2012-11-05', 'MessageBody': 'x'})
    check('1: no queue at all: still MissingParameter',
          st == 400 and '<Code>MissingParameter</Code>' in body, (st, body))
    st, body = raw('/%s/c_nosuch' % ACCOUNT, {'Action': 'SendMessage', 'Version': '2012-11-05',
                                              'MessageBody': 'x'})
    check('1: a path naming no queue: NonExistentQueue',
          st == 400 and 'NonExistentQueue' in body, (st, body))
    sqs.purge_queue(QueueUrl=q)


def item2_ids():
    q = sqs.create_queue(QueueName='c_ids')['QueueUrl']
    r = sqs.send_message(QueueUrl=q, MessageBody='id')
    check('2: SendMessage MessageId is a UUID', is_uuid(r.get('MessageId')), r)
    value('http_message_id', r['MessageId'])
    b = sqs.send_message_batch(QueueUrl=q, Entries=[{'Id': 'a', 'MessageBody': 'b1'}])
    check('2: SendMessageBatch MessageId is a UUID',
          is_uuid(b['Successful'][0].get('MessageId')), b)
    m = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)['Messages']
    check('2: ReceiveMessage MessageIds are the UUIDs the sends answered',
          sorted(x['MessageId'] for x in m) ==
          sorted([r['MessageId'], b['Successful'][0]['MessageId']]), m)
    fq = sqs.create_queue(QueueName='c_ids.fifo', Attributes={
        'FifoQueue': 'true', 'ContentBasedDeduplication': 'true'})['QueueUrl']
    s1 = sqs.send_message(QueueUrl=fq, MessageBody='f1', MessageGroupId='g')['SequenceNumber']
    s2 = sqs.send_message(QueueUrl=fq, MessageBody='f2', MessageGroupId='g')['SequenceNumber']
    check('2: FIFO SequenceNumber: 20+ digits, increasing',
          s1.isdigit() and len(s1) >= 20 and len(s2) >= 20 and int(s2) > int(s1), (s1, s2))
    m = sqs.receive_message(QueueUrl=fq, AttributeNames=['SequenceNumber'])['Messages'][0]
    check('2: received SequenceNumber is the sent one',
          m['Attributes'].get('SequenceNumber') == s1, m)


def item3_stale():
    q = sqs.create_queue(QueueName='c_stale')['QueueUrl']
    sqs.send_message(QueueUrl=q, MessageBody='slow')
    old = sqs.receive_message(QueueUrl=q, VisibilityTimeout=0)['Messages'][0]
    new = sqs.receive_message(QueueUrl=q, VisibilityTimeout=60)['Messages'][0]
    code, msg = error(sqs.delete_message, QueueUrl=q, ReceiptHandle=old['ReceiptHandle'])
    check('3: DeleteMessage with a stale receipt: success', code is None, (code, msg))
    code, msg = error(sqs.change_message_visibility, QueueUrl=q,
                      ReceiptHandle=old['ReceiptHandle'], VisibilityTimeout=5)
    check('3: ChangeMessageVisibility with a stale receipt: InvalidParameterValue, SQS\'s words',
          code == 'InvalidParameterValue' and msg is not None and msg.endswith(
              'Reason: Message does not exist or is not available for visibility timeout change.'),
          (code, msg))
    r = sqs.delete_message_batch(QueueUrl=q, Entries=[{'Id': 'o', 'ReceiptHandle': old['ReceiptHandle']}])
    check('3: DeleteMessageBatch with a stale receipt: success',
          [e['Id'] for e in r.get('Successful', [])] == ['o'] and not r.get('Failed'), r)
    r = sqs.change_message_visibility_batch(QueueUrl=q, Entries=[
        {'Id': 'o', 'ReceiptHandle': old['ReceiptHandle'], 'VisibilityTimeout': 5}])
    check('3: ChangeMessageVisibilityBatch with a stale receipt: InvalidParameterValue',
          [(e['Id'], e['Code']) for e in r.get('Failed', [])] == [('o', 'InvalidParameterValue')], r)
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['ApproximateNumberOfMessagesNotVisible'])
    check('3: the stale deletes deleted nothing',
          a['Attributes'].get('ApproximateNumberOfMessagesNotVisible') == '1', a)
    value('stale_receipt', old['ReceiptHandle'])
    code, msg = error(sqs.delete_message, QueueUrl=q, ReceiptHandle='garbage')
    check('3: a forged receipt: ReceiptHandleIsInvalid, SQS\'s words',
          code == 'ReceiptHandleIsInvalid' and
          msg == 'The input receipt handle "garbage" is not a valid receipt handle.', (code, msg))
    # the message stays in flight under new: SQL is then shown the stale one


def item4_dead_letters():
    dq = sqs.create_queue(QueueName='c_dlq')['QueueUrl']
    sq = sqs.create_queue(QueueName='c_src', Attributes={'RedrivePolicy': json.dumps(
        {'deadLetterTargetArn': arn('c_dlq'), 'maxReceiveCount': '1'})})['QueueUrl']
    attrs = {'a%d' % i: {'DataType': 'String', 'StringValue': 'v%d' % i} for i in range(10)}
    sqs.send_message(QueueUrl=sq, MessageBody='poison', MessageAttributes=attrs)
    sqs.receive_message(QueueUrl=sq, VisibilityTimeout=0)
    sqs.receive_message(QueueUrl=sq, VisibilityTimeout=0)
    m = None
    for _ in range(50):
        got = sqs.receive_message(QueueUrl=dq, MessageAttributeNames=['All'],
                                  AttributeNames=['All']).get('Messages')
        if got:
            m = got[0]
            break
        time.sleep(0.2)
    check('4: the dead letter arrived', m is not None and m['Body'] == 'poison', m)
    m = m or {}
    check('4: a dead letter carries exactly the attributes it was sent with',
          m.get('MessageAttributes') == attrs, m.get('MessageAttributes'))
    check('4: DeadLetterQueueSourceArn names the source queue',
          m.get('Attributes', {}).get('DeadLetterQueueSourceArn') == arn('c_src'), m.get('Attributes'))
    code, msg = error(sqs.send_message, QueueUrl=sq, MessageBody='redriven by the app',
                      MessageAttributes=m.get('MessageAttributes', {}))
    check('4: an app-level redrive of the dead letter is accepted', code is None, (code, msg))


def item5_delete_dlq():
    sqs.create_queue(QueueName='c_dlq5')
    sqs.create_queue(QueueName='c_src5', Attributes={'RedrivePolicy': json.dumps(
        {'deadLetterTargetArn': arn('c_dlq5'), 'maxReceiveCount': '3'})})
    code, msg = error(sqs.delete_queue, QueueUrl=url('c_dlq5'))
    check('5: DeleteQueue of a dead-letter queue: success', code is None, (code, msg))
    code, msg = error(sqs.get_queue_url, QueueName='c_dlq5')
    check('5: it is gone', code == 'AWS.SimpleQueueService.NonExistentQueue', (code, msg))
    code, msg = error(sqs.send_message, QueueUrl=url('c_src5'), MessageBody='x')
    check('5: its source still works', code is None, (code, msg))


def item6_attributes():
    q = sqs.create_queue(QueueName='c_sse', Attributes={'SqsManagedSseEnabled': 'true'})['QueueUrl']
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['All'])['Attributes']
    check('6: SqsManagedSseEnabled accepted and reported', a.get('SqsManagedSseEnabled') == 'true', a)
    k = sqs.create_queue(QueueName='c_kms', Attributes={
        'KmsMasterKeyId': 'alias/aws/sqs', 'KmsDataKeyReusePeriodSeconds': '600'})['QueueUrl']
    a = sqs.get_queue_attributes(QueueUrl=k, AttributeNames=['KmsMasterKeyId',
                                                             'KmsDataKeyReusePeriodSeconds'])['Attributes']
    check('6: KmsMasterKeyId and KmsDataKeyReusePeriodSeconds accepted and reported',
          a == {'KmsMasterKeyId': 'alias/aws/sqs', 'KmsDataKeyReusePeriodSeconds': '600'}, a)
    sqs.set_queue_attributes(QueueUrl=k, Attributes={'KmsDataKeyReusePeriodSeconds': '300'})
    a = sqs.get_queue_attributes(QueueUrl=k, AttributeNames=['All'])['Attributes']
    check('6: SetQueueAttributes changes them',
          a.get('KmsDataKeyReusePeriodSeconds') == '300' and a.get('KmsMasterKeyId') == 'alias/aws/sqs'
          and a.get('SqsManagedSseEnabled') == 'false', a)
    code, msg = error(sqs.set_queue_attributes, QueueUrl=k,
                      Attributes={'KmsDataKeyReusePeriodSeconds': '59'})
    check('6: KmsDataKeyReusePeriodSeconds 59: InvalidAttributeValue', code == 'InvalidAttributeValue',
          (code, msg))
    policy = json.dumps({'Version': '2012-10-17', 'Statement': [{
        'Effect': 'Allow', 'Principal': {'Service': 'sns.amazonaws.com'},
        'Action': 'sqs:SendMessage', 'Resource': arn('c_sse')}]})
    code, msg = error(sqs.set_queue_attributes, QueueUrl=q, Attributes={'Policy': policy})
    check('6: a Policy grants cannot express: refused, saying why',
          code == 'InvalidAttributeValue' and msg is not None and 'GRANT' in msg, (code, msg))
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['All'])['Attributes']
    check('6: the refused Policy is not stored', 'Policy' not in a, a)
    code, msg = error(sqs.set_queue_attributes, QueueUrl=q, Attributes={'Policy': ''})
    check('6: an empty Policy (none) is accepted', code is None, (code, msg))
    r = sqs.send_message(QueueUrl=q, MessageBody='traced', MessageSystemAttributes={
        'AWSTraceHeader': {'DataType': 'String', 'StringValue': 'Root=1-5759e988-bd862e3fe1be46a994272793'}})
    check('6: AWSTraceHeader accepted', is_uuid(r.get('MessageId')), r)
    m = sqs.receive_message(QueueUrl=q, AttributeNames=['AWSTraceHeader'],
                            MessageAttributeNames=['All'])['Messages'][0]
    check('6: AWSTraceHeader returned as a system attribute, not a message attribute',
          m.get('Attributes', {}).get('AWSTraceHeader') == 'Root=1-5759e988-bd862e3fe1be46a994272793'
          and 'MessageAttributes' not in m, m)


def item7_fifo_purge():
    fq = sqs.create_queue(QueueName='c_f.fifo', Attributes={'FifoQueue': 'true'})['QueueUrl']
    code, msg = error(sqs.send_message, QueueUrl=fq, MessageBody='x', MessageDeduplicationId='d')
    check('7: FIFO send without a group: MissingParameter, SQS\'s words',
          code == 'MissingParameter' and msg == 'The request must contain the parameter MessageGroupId.',
          (code, msg))
    code, msg = error(sqs.send_message, QueueUrl=fq, MessageBody='x', MessageGroupId='g')
    check('7: FIFO send without a deduplication id: InvalidParameterValue, SQS\'s words',
          code == 'InvalidParameterValue' and msg == 'The queue should either have ContentBasedDeduplication '
          'enabled or MessageDeduplicationId provided explicitly', (code, msg))
    code, msg = error(sqs.send_message, QueueUrl=fq, MessageBody='x', MessageGroupId='g',
                      MessageDeduplicationId='d', DelaySeconds=3)
    check('7: FIFO send with a delay: InvalidParameterValue, SQS\'s words',
          code == 'InvalidParameterValue' and msg == 'Value 3 for parameter DelaySeconds is invalid. '
          'Reason: The request include parameter that is not valid for this queue type.', (code, msg))
    q = sqs.create_queue(QueueName='c_purge')['QueueUrl']
    sqs.send_message(QueueUrl=q, MessageBody='before')
    code, msg = error(sqs.purge_queue, QueueUrl=q)
    check('7: PurgeQueue', code is None, (code, msg))
    sqs.send_message(QueueUrl=q, MessageBody='after')
    code, msg = error(sqs.purge_queue, QueueUrl=q)
    check('7: a second PurgeQueue within 60 s: PurgeQueueInProgress',
          code == 'AWS.SimpleQueueService.PurgeQueueInProgress', (code, msg))
    a = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['ApproximateNumberOfMessages'])
    check('7: the refused purge purged nothing',
          a['Attributes'].get('ApproximateNumberOfMessages') == '1', a)


def sts_caller_identity():
    sts = boto3.client('sts', endpoint_url=ENDPOINT, region_name=REGION,
                       aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                       config=botocore.config.Config(retries={'max_attempts': 1}))
    try:
        r = sts.get_caller_identity()
        r.pop('ResponseMetadata', None)
    except botocore.exceptions.ClientError as e:
        r = e.response.get('Error')
    check('STS GetCallerIdentity: the account and an ARN naming the key\'s role',
          r == {'UserId': KEY, 'Account': ACCOUNT, 'Arn': 'arn:aws:iam::%s:role/sqs_app' % ACCOUNT}, r)
    # an sts-scoped signature is good for GetCallerIdentity only
    body = urllib.parse.urlencode({'Action': 'ListQueues', 'Version': '2012-11-05'}).encode()
    h = {'Host': HOST, 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8'}
    req = AWSRequest(method='POST', url='http://%s/' % HOST, data=body, headers=h)
    SigV4Auth(Credentials(KEY, SECRET), 'sts', REGION).add_auth(req)
    conn = http.client.HTTPConnection(HOST, timeout=30)
    conn.request('POST', '/', body=body, headers=dict(req.headers.items()))
    resp = conn.getresponse()
    text = resp.read().decode()
    check('STS: an sts-scoped signature cannot call SQS actions',
          resp.status == 400 and 'InvalidAction' in text, (resp.status, text))
    st, text = raw('/', {'Action': 'GetCallerIdentity', 'Version': '2011-06-15'})
    check('STS: GetCallerIdentity signed for sqs is no SQS action',
          st == 400 and 'InvalidAction' in text, (st, text))


def wording():
    q = sqs.create_queue(QueueName='c_words')['QueueUrl']
    st, body = raw('/%s/c_words' % ACCOUNT, {'Action': 'SendMessageBatch', 'Version': '2012-11-05'})
    check('wording: an empty batch, in SQS\'s words',
          st == 400 and 'EmptyBatchRequest' in body and
          'There should be at least one SendMessageBatchRequestEntry in the request.' in body, (st, body))
    code, msg = error(sqs.send_message, QueueUrl=q, MessageBody='x', MessageAttributes={
        'a': {'DataType': 'Text', 'StringValue': 'v'}})
    check('wording: an attribute type, in SQS\'s words',
          code == 'InvalidParameterValue' and msg == "The type of message (user) attribute 'a' is invalid. "
          "You must use only the following supported type prefixes: Binary, Number, String.", (code, msg))
    code, msg = error(sqs.send_message, QueueUrl=q, MessageBody='x' * (1024 * 1024 + 1))
    check('wording: message size, in SQS\'s words',
          code == 'InvalidParameterValue' and msg == 'One or more parameters are invalid. Reason: '
          'Message must be shorter than 1048576 bytes.', (code, msg))


def main():
    # each item on its own: one that raises fails alone, the others still run
    for item in (item1_path_and_protocol, item2_ids, item3_stale, item4_dead_letters,
                 item5_delete_dlq, item6_attributes, item7_fifo_purge, sts_caller_identity,
                 wording):
        try:
            item()
        except Exception as e:  # noqa: BLE001 (reported as a failed check)
            check('%s ran to its end' % item.__name__, False, repr(e))


def public_url():
    r = sqs.get_queue_url(QueueName='c_ids')
    check('7: GetQueueUrl answers queue.sqs_public_url',
          r['QueueUrl'] == 'https://sqs.example.test/000000000000/c_ids', r)
    r = sqs.create_queue(QueueName='c_public')
    check('7: CreateQueue answers queue.sqs_public_url',
          r['QueueUrl'] == 'https://sqs.example.test/000000000000/c_public', r)
    urls = sqs.list_queues(QueueNamePrefix='c_i').get('QueueUrls', [])
    check('7: ListQueues answers queue.sqs_public_url',
          urls and all(u.startswith('https://sqs.example.test/000000000000/') for u in urls), urls)
    # a client given the public URL still reaches the queue (the name is its last segment)
    code, msg = error(sqs.send_message, QueueUrl=r['QueueUrl'], MessageBody='x')
    check('7: the public URL addresses the queue', code is None, (code, msg))


{'main': main, 'public_url': public_url}[PHASE]()
