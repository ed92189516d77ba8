"""tap_lines.py: what the TAP tests' Python clients in this folder share
(actions_client.py, compat_client.py, move_tasks_client.py): the lines
their .pl file reads ("ok<TAB>name", "not ok<TAB>name<TAB>detail",
"value<TAB>name<TAB>text"), the names of a queue on the wire, and a boto3
client that does not retry (a test sees each answer as it is)."""

REGION = 'us-east-1'
ACCOUNT = '000000000000'


def check(name, cond, detail=''):
    if cond:
        print('ok\t%s' % name, flush=True)
    else:
        print('not ok\t%s\t%s' % (name, str(detail).replace('\n', ' ')), flush=True)


def value(name, text):
    print('value\t%s\t%s' % (name, text), flush=True)


def queue_url(endpoint, name):
    return '%s/%s/%s' % (endpoint, ACCOUNT, name)


def queue_arn(name):
    return 'arn:aws:sqs:%s:%s:%s' % (REGION, ACCOUNT, name)


def sqs_client(endpoint, key, secret):
    import boto3
    import botocore.config
    return boto3.client('sqs', endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=botocore.config.Config(retries={'max_attempts': 1},
                                                      read_timeout=60))
