# The SQS endpoint's two protocols on the wire (REFERENCE.md 1.7,
# src/sqs/protocol.c, query.c): for every action, in AWS JSON 1.0 and in Query, an
# error path answered with SQS's status, code and (JSON) __type and
# x-amzn-query-error header; unsupported actions (AddPermission,
# RemovePermission), an unknown action, a bad X-Amz-Target, malformed,
# non-object and too deeply nested JSON bodies, a Query request without
# Action, bad flattened names, too many parameters, unsigned and wrongly
# signed requests.  Successes are parsed by
# botocore's own Query parser (its SQS model), so the XML has the names
# and nesting that model expects, and text with ", <, & and \r survives.
# All requests of a protocol go over one keep-alive connection, and
# afterwards no session of the endpoint sits in a transaction.
#
# Requests are signed with botocore's SigV4 signer (test/t/sqs_wire.py,
# Debian's botocore 1.29, whose SQS model is the Query one).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use Digest::MD5 qw(md5_hex);
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';
my ($rc) = IPC::Run::run([ $python, '-c', 'import botocore.auth' ], '>', \my $o, '2>', \my $e);
plan skip_all => 'python3 with botocore is needed' unless $rc;
# Query requests are made and their answers read with botocore's SQS
# model, the Query one up to botocore 1.34.89 (bookworm's 1.29); newer
# botocore (Debian sid's) models SQS in JSON only.
($rc) = IPC::Run::run([ $python, '-c',
		'import sys, botocore.session; sys.exit(botocore.session.get_session().get_service_model("sqs").protocol != "query")' ],
	'>', \$o, '2>', \$e);
plan skip_all => 'botocore models SQS in JSON only (newer than 1.34.89): this test reads Query answers with its Query model'
  unless $rc;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = QueueWorkerNode::start(
	'sqs_protocol', qq(
queue.sqs_listen = '127.0.0.1:$port'
queue.sqs_workers = 1
queue.sqs_account_id = '123456789012'
max_worker_processes = 16
));

$node->safe_psql(
	'postgres', q(
CREATE ROLE app LOGIN;
GRANT USAGE ON SCHEMA queue TO app;
GRANT CREATE ON DATABASE postgres TO app;
SELECT queue.create('other');
));
my ($key, $secret) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT access_key_id || '|' || secret_access_key FROM queue.create_access_key('app', 'AKIDPROTOCOLTEST0001', 'protocol-test-secret')"
  );
is($key, 'AKIDPROTOCOLTEST0001', 'access key made with the given id');

# The endpoint accepts connections (the worker has bound its port).
my $up = 0;
for (1 .. 300)
{
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Proto => 'tcp');
	if ($s) { close $s; $up = 1; last; }
	select(undef, undef, undef, 0.1);
}
ok($up, 'endpoint listens');

# Send requests (hashes as sqs_wire.py reads them), one connection for
# the lot; returns the answers in order.
sub wire
{
	my @reqs = @_;
	my $in = join '', map { encode_json($_) . "\n" } @reqs;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, '-I', "$FindBin::RealBin/sqs_wire.py", $port, $key, $secret ],
		'<', \$in, '>', \$out, '2>', \$err)
	  or diag("sqs_wire.py failed: $err");
	my @answers = map { decode_json($_) } grep { /\S/ } split /\n/, $out;
	is(scalar @answers, scalar @reqs, 'an answer to every request') or diag($err);
	return @answers;
}

my $base = "http://127.0.0.1:$port/123456789012";
my $q1 = "$base/q1";
my $nosuch = "$base/nosuch";
my $nosuch_arn = 'arn:aws:sqs:us-east-1:123456789012:nosuch';

# Query code -> AWS JSON 1.0 __type
my %json_type = (
	'AWS.SimpleQueueService.NonExistentQueue' => 'com.amazonaws.sqs#QueueDoesNotExist',
	'QueueAlreadyExists' => 'com.amazonaws.sqs#QueueNameExists',
	'InvalidParameterValue' => 'com.amazonaws.sqs#InvalidParameterValueException',
	'MissingParameter' => 'com.amazonaws.sqs#MissingRequiredParameterException',
	'AccessDenied' => 'com.amazon.coral.service#AccessDeniedException',
	'InvalidAttributeName' => 'com.amazonaws.sqs#InvalidAttributeName',
	'InvalidAttributeValue' => 'com.amazonaws.sqs#InvalidAttributeValue',
	'ReceiptHandleIsInvalid' => 'com.amazonaws.sqs#ReceiptHandleIsInvalid',
	'ResourceNotFoundException' => 'com.amazonaws.sqs#ResourceNotFoundException',
	'InvalidAction' => 'com.amazon.coral.service#UnknownOperationException',
	'SerializationException' => 'com.amazon.coral.service#SerializationException',
	'MissingAction' => 'com.amazon.coral.service#MissingAction',
	'InvalidClientTokenId' => 'com.amazon.coral.service#InvalidClientTokenId',
	'SignatureDoesNotMatch' => 'com.amazon.coral.service#SignatureDoesNotMatch',
	'MissingAuthenticationToken' => 'com.amazon.coral.service#MissingAuthenticationToken',
	map { ("AWS.SimpleQueueService.$_" => "com.amazonaws.sqs#$_") }
	  qw(EmptyBatchRequest TooManyEntriesInBatchRequest BatchEntryIdsNotDistinct UnsupportedOperation));

# [action, input, status, Query code, protocols (default both), extra request keys]
my @entries11 = map { { Id => "e$_", MessageBody => 'x' } } 1 .. 11;
my @cases = (
	[ 'CreateQueue', {}, 400, 'MissingParameter' ],
	[ 'CreateQueue', { QueueName => 'bad name!' }, 400, 'InvalidParameterValue' ],
	[ 'CreateQueue', { QueueName => 'q1', Attributes => { VisibilityTimeout => '99' } }, 400, 'QueueAlreadyExists' ],
	[ 'DeleteQueue', {}, 400, 'MissingParameter' ],
	[ 'DeleteQueue', { QueueUrl => $nosuch }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'GetQueueUrl', {}, 400, 'MissingParameter' ],
	[ 'GetQueueUrl', { QueueName => 'nosuch' }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'ListQueues', { MaxResults => 0 }, 400, 'InvalidParameterValue' ],
	[ 'GetQueueAttributes', {}, 400, 'MissingParameter' ],
	[ 'GetQueueAttributes', { QueueUrl => $nosuch }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'GetQueueAttributes', { QueueUrl => $q1, AttributeNames => ['NoSuchAttribute'] }, 400, 'InvalidAttributeName' ],
	[ 'SetQueueAttributes', {}, 400, 'MissingParameter' ],
	[ 'SetQueueAttributes', { QueueUrl => $nosuch, Attributes => { DelaySeconds => '1' } }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'SetQueueAttributes', { QueueUrl => $q1, Attributes => { DelaySeconds => '901' } }, 400, 'InvalidAttributeValue' ],
	[ 'PurgeQueue', {}, 400, 'MissingParameter' ],
	[ 'PurgeQueue', { QueueUrl => $nosuch }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'TagQueue', {}, 400, 'MissingParameter' ],
	[ 'TagQueue', { QueueUrl => $nosuch, Tags => { a => 'b' } }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'UntagQueue', {}, 400, 'MissingParameter' ],
	[ 'UntagQueue', { QueueUrl => $nosuch, TagKeys => ['a'] }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'ListQueueTags', {}, 400, 'MissingParameter' ],
	[ 'ListQueueTags', { QueueUrl => $nosuch }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'SendMessage', {}, 400, 'MissingParameter' ],
	[ 'SendMessage', { QueueUrl => $nosuch, MessageBody => 'x' }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'SendMessage', { QueueUrl => $q1 }, 400, 'MissingParameter' ],
	[ 'SendMessage', { QueueUrl => $q1, MessageBody => 'x', DelaySeconds => 901 }, 400, 'InvalidParameterValue' ],
	[ 'SendMessage', { QueueUrl => "$base/other", MessageBody => 'x' }, 403, 'AccessDenied' ],
	[ 'SendMessageBatch', {}, 400, 'MissingParameter' ],
	[ 'SendMessageBatch', { QueueUrl => $nosuch, Entries => [ { Id => 'a', MessageBody => 'x' } ] }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'SendMessageBatch', { QueueUrl => $q1, Entries => [] }, 400, 'AWS.SimpleQueueService.EmptyBatchRequest' ],
	[ 'SendMessageBatch', { QueueUrl => $q1, Entries => \@entries11 }, 400, 'AWS.SimpleQueueService.TooManyEntriesInBatchRequest' ],
	[ 'SendMessageBatch', { QueueUrl => $q1, Entries => [ { Id => 'a', MessageBody => 'x' }, { Id => 'a', MessageBody => 'y' } ] }, 400, 'AWS.SimpleQueueService.BatchEntryIdsNotDistinct' ],
	[ 'ReceiveMessage', {}, 400, 'MissingParameter' ],
	[ 'ReceiveMessage', { QueueUrl => $nosuch }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'ReceiveMessage', { QueueUrl => $q1, WaitTimeSeconds => 21 }, 400, 'InvalidParameterValue' ],
	[ 'DeleteMessage', {}, 400, 'MissingParameter' ],
	[ 'DeleteMessage', { QueueUrl => $nosuch, ReceiptHandle => 'r' }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'DeleteMessage', { QueueUrl => $q1, ReceiptHandle => 'garbage' }, 404, 'ReceiptHandleIsInvalid' ],
	[ 'DeleteMessageBatch', {}, 400, 'MissingParameter' ],
	[ 'DeleteMessageBatch', { QueueUrl => $nosuch, Entries => [ { Id => 'a', ReceiptHandle => 'r' } ] }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'DeleteMessageBatch', { QueueUrl => $q1, Entries => [] }, 400, 'AWS.SimpleQueueService.EmptyBatchRequest' ],
	[ 'ChangeMessageVisibility', {}, 400, 'MissingParameter' ],
	[ 'ChangeMessageVisibility', { QueueUrl => $nosuch, ReceiptHandle => 'r', VisibilityTimeout => 1 }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'ChangeMessageVisibility', { QueueUrl => $q1, ReceiptHandle => 'garbage', VisibilityTimeout => 1 }, 404, 'ReceiptHandleIsInvalid' ],
	[ 'ChangeMessageVisibilityBatch', {}, 400, 'MissingParameter' ],
	[ 'ChangeMessageVisibilityBatch', { QueueUrl => $nosuch, Entries => [ { Id => 'a', ReceiptHandle => 'r', VisibilityTimeout => 1 } ] }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'ChangeMessageVisibilityBatch', { QueueUrl => $q1, Entries => [] }, 400, 'AWS.SimpleQueueService.EmptyBatchRequest' ],
	[ 'ListDeadLetterSourceQueues', {}, 400, 'MissingParameter' ],
	[ 'ListDeadLetterSourceQueues', { QueueUrl => $nosuch }, 400, 'AWS.SimpleQueueService.NonExistentQueue' ],
	[ 'StartMessageMoveTask', {}, 400, 'MissingParameter' ],
	[ 'StartMessageMoveTask', { SourceArn => $nosuch_arn }, 404, 'ResourceNotFoundException' ],
	[ 'ListMessageMoveTasks', {}, 400, 'MissingParameter' ],
	[ 'ListMessageMoveTasks', { SourceArn => $nosuch_arn }, 404, 'ResourceNotFoundException' ],
	[ 'CancelMessageMoveTask', {}, 400, 'MissingParameter' ],
	[ 'CancelMessageMoveTask', { TaskHandle => 'garbage' }, 400, 'InvalidParameterValue' ],
	[ 'AddPermission', { QueueUrl => $q1, Label => 'l', AWSAccountIds => ['111111111111'], Actions => ['SendMessage'] }, 400, 'AWS.SimpleQueueService.UnsupportedOperation' ],
	[ 'RemovePermission', { QueueUrl => $q1, Label => 'l' }, 400, 'AWS.SimpleQueueService.UnsupportedOperation' ],
	[ 'FlyToTheMoon', {}, 400, 'InvalidAction' ],
	# protocol-level errors
	[ 'SendMessage', {}, 400, 'InvalidAction', ['json'], { target => 'AmazonSNS.Publish' } ],
	[ 'SendMessage', {}, 400, 'SerializationException', ['json'], { raw => '{"QueueUrl": ' } ],
	[ 'SendMessage', {}, 400, 'SerializationException', ['json'], { raw => '["QueueUrl"]' } ],
	[ 'SendMessage', {}, 400, 'SerializationException', ['json'], { raw => '{"QueueUrl": ' . ('[' x 40) . (']' x 40) . '}' } ],
	[ 'SendMessage', {}, 400, 'MissingAction', ['query'], { no_action => JSON::PP::true } ],
	[ 'ListQueues', {}, 400, 'InvalidParameterValue', ['query'], { params => [ map { [ "P$_", 'v' ] } 1 .. 1001 ] } ],
	[ 'CreateQueue', { QueueName => 'q9' }, 400, 'InvalidParameterValue', ['query'], { params => [ [ 'Attribute.0.Name', 'DelaySeconds' ], [ 'Attribute.0.Value', '1' ] ] } ],
	[ 'CreateQueue', { QueueName => 'q9' }, 400, 'InvalidParameterValue', ['query'], { params => [ [ 'Attribute.x.Name', 'DelaySeconds' ] ] } ],
	[ 'CreateQueue', { QueueName => 'q9' }, 400, 'MissingParameter', ['query'], { params => [ [ 'Attribute.1.Value', '1' ] ] } ],
	# authentication
	[ 'ListQueues', {}, 403, 'MissingAuthenticationToken', undef, { sign => 'none' } ],
	[ 'ListQueues', {}, 403, 'SignatureDoesNotMatch', undef, { sign => 'secret' } ],
	[ 'ListQueues', {}, 403, 'InvalidClientTokenId', undef, { sign => 'key' } ],
);

# First, successes: q1 made over Query (as app), then the answers of the
# main actions parsed by botocore.
my $odd = "quote \" lt < amp & cr \r lf \n end";
my @ok = wire(
	{ proto => 'query', action => 'CreateQueue', input => { QueueName => 'q1', tags => { team => 'a&b' } } },
	{ proto => 'query', action => 'GetQueueUrl', input => { QueueName => 'q1' } },
	{ proto => 'query', action => 'ListQueues', input => {} },
	{ proto => 'query', action => 'GetQueueAttributes', input => { QueueUrl => $q1, AttributeNames => ['All'] } },
	{ proto => 'query', action => 'ListQueueTags', input => { QueueUrl => $q1 } },
	{ proto => 'query', action => 'SendMessage', input => { QueueUrl => $q1, MessageBody => $odd,
			MessageAttributes => { color => { DataType => 'String', StringValue => $odd } } } },
	{ proto => 'query', action => 'ReceiveMessage', input => { QueueUrl => $q1, AttributeNames => ['All'],
			MessageAttributeNames => ['All'] } },
	{ proto => 'query', action => 'SendMessageBatch', input => { QueueUrl => $q1,
			Entries => [ { Id => 'one', MessageBody => '1' }, { Id => 'two', MessageBody => '2' } ] } },
	{ proto => 'query', action => 'TagQueue', input => { QueueUrl => $q1, Tags => { env => 'test' } } },
	{ proto => 'json', action => 'SendMessage', input => { QueueUrl => $q1, MessageBody => 'json body' } },
	{ proto => 'json', action => 'ListQueueTags', input => { QueueUrl => $q1 } });

is($ok[0]{status}, 200, 'Query CreateQueue: 200');
like($ok[0]{ctype}, qr{^text/xml}, 'Query answer is text/xml');
like($ok[0]{body}, qr{^<\?xml version="1.0"\?><CreateQueueResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><CreateQueueResult>},
	'Query answer: <CreateQueueResponse> in SQS\'s namespace');
like($ok[0]{body}, qr{<ResponseMetadata><RequestId>[0-9a-f-]{36}</RequestId></ResponseMetadata></CreateQueueResponse>$},
	'Query answer ends with its request id');
is($ok[0]{parsed}{QueueUrl}, $q1, 'CreateQueue: botocore reads QueueUrl');
is($ok[1]{parsed}{QueueUrl}, $q1, 'GetQueueUrl: botocore reads QueueUrl');
ok((grep { $_ eq $q1 } @{ $ok[2]{parsed}{QueueUrls} // [] }), 'ListQueues: botocore reads QueueUrls');
is($ok[3]{parsed}{Attributes}{VisibilityTimeout}, '30', 'GetQueueAttributes: botocore reads the Attributes map');
is($ok[3]{parsed}{Attributes}{QueueArn}, 'arn:aws:sqs:us-east-1:123456789012:q1', 'QueueArn has the account and the region');
is_deeply($ok[4]{parsed}{Tags}, { team => 'a&b' }, 'CreateQueue\'s Tag.N.Key/Value made tags, ListQueueTags reads them');
is($ok[5]{parsed}{MD5OfMessageBody}, md5_hex($odd), 'SendMessage: botocore reads MD5OfMessageBody');
like($ok[5]{parsed}{MessageId} // '', qr/\S/, 'SendMessage: botocore reads MessageId');
like($ok[5]{parsed}{MD5OfMessageAttributes} // '', qr/^[0-9a-f]{32}$/, 'SendMessage: MD5OfMessageAttributes');
my $m = $ok[6]{parsed}{Messages}[0] // {};
is($m->{Body}, $odd, 'ReceiveMessage: the body with " < & \\r \\n comes back as sent through the XML');
is($m->{MessageAttributes}{color}{StringValue}, $odd, 'ReceiveMessage: message attribute as sent');
is($m->{MessageAttributes}{color}{DataType}, 'String', 'ReceiveMessage: message attribute DataType');
like($m->{Attributes}{SentTimestamp} // '', qr/^\d{13}$/, 'ReceiveMessage: the Attributes map');
like($m->{ReceiptHandle} // '', qr/\S/, 'ReceiveMessage: receipt handle');
is_deeply([ sort map { $_->{Id} } @{ $ok[7]{parsed}{Successful} // [] } ], [ 'one', 'two' ],
	'SendMessageBatch: SendMessageBatchResultEntry elements');
is($ok[8]{status}, 200, 'TagQueue: 200');
unlike($ok[8]{body}, qr/TagQueueResult/, 'TagQueue: no empty result element');
like($ok[8]{body}, qr{^<\?xml version="1.0"\?><TagQueueResponse [^>]*><ResponseMetadata>}, 'TagQueue: only ResponseMetadata');
is($ok[9]{status}, 200, 'JSON SendMessage: 200');
is($ok[9]{ctype}, 'application/x-amz-json-1.0', 'JSON answer is application/x-amz-json-1.0');
like($ok[9]{parsed}{MD5OfMessageBody} // '', qr/^[0-9a-f]{32}$/, 'JSON SendMessage: the output shape, unwrapped');
is_deeply($ok[10]{parsed}{Tags}, { team => 'a&b', env => 'test' }, 'JSON ListQueueTags sees the Query TagQueue\'s tag');

# The error cases, each in both protocols unless restricted, each
# protocol's over one connection.
for my $proto ('json', 'query')
{
	my (@reqs, @expect);
	for my $c (@cases)
	{
		my ($action, $input, $status, $code, $protos, $extra) = @$c;
		next if $protos && !grep { $_ eq $proto } @$protos;
		push @reqs, { proto => $proto, action => $action, input => $input, %{ $extra // {} } };
		push @expect, $c;
	}
	my @ans = wire(@reqs);
	for my $i (0 .. $#expect)
	{
		my ($action, $input, $status, $code, $protos, $extra) = @{ $expect[$i] };
		my $a = $ans[$i] // {};
		my $what = "$proto $action "
		  . ($extra ? join(',', map { "$_" } sort keys %$extra) . ' ' : '')
		  . join(',', sort keys %$input) . " -> $code";
		is($a->{status}, $status, "$what: status $status") or diag($a->{body});
		is($a->{code}, $code, "$what: code");
		if ($proto eq 'json')
		{
			is($a->{qerr}, "$code;Sender", "$what: x-amzn-query-error");
			is($a->{type}, $json_type{$code}, "$what: __type");
			is($a->{ctype}, 'application/x-amz-json-1.0', "$what: JSON content type");
		}
		else
		{
			is($a->{type}, 'Sender', "$what: <Type>Sender</Type>");
			like($a->{ctype} // '', qr{^text/xml}, "$what: XML content type");
		}
		like($a->{message} // '', qr/\S/, "$what: a message");
	}
}

# --- Older clients' unindexed forms ------------------------------------------
# Exactly what boto 2.49 (Debian's python3-boto) and fog-aws 3.15 send: to
# the queue's URL as path, a list's one entry without an index
# (AttributeName=All) and a map's one entry without one (Attribute.Name,
# Attribute.Value); SQS's Query API takes both as the first entry.
{
	my $qpath = '/123456789012/oldforms';
	my ($made) = wire({ proto => 'query', action => 'CreateQueue', input => { QueueName => 'oldforms' } });
	is($made->{status}, 200, 'a queue for the old forms');
	my @old = wire(
		{ proto => 'query', action => 'SetQueueAttributes', path => $qpath,
		  params => [ [ 'Attribute.Name', 'VisibilityTimeout' ], [ 'Attribute.Value', '42' ] ] },
		{ proto => 'query', action => 'GetQueueAttributes', path => $qpath,
		  params => [ [ 'AttributeName', 'All' ] ] },
		{ proto => 'query', action => 'GetQueueAttributes', path => $qpath,
		  params => [ [ 'AttributeName', 'VisibilityTimeout' ] ] },
		{ proto => 'query', action => 'SendMessage', path => $qpath,
		  params => [ [ 'MessageBody', 'from an old client' ] ] },
		{ proto => 'query', action => 'ReceiveMessage', path => $qpath,
		  params => [ [ 'AttributeName', 'All' ], [ 'MaxNumberOfMessages', '10' ], [ 'VisibilityTimeout', '0' ] ] },
		{ proto => 'query', action => 'SetQueueAttributes', path => $qpath,
		  params => [ [ 'Attribute.Name', 'VisibilityTimeout' ], [ 'Attribute.1.Value', '43' ] ] },
		{ proto => 'query', action => 'GetQueueAttributes', path => $qpath,
		  params => [ [ 'AttributeName', 'VisibilityTimeout' ], [ 'AttributeName.1', 'DelaySeconds' ] ] });
	is($old[0]{status}, 200, 'boto 2 SetQueueAttributes (Attribute.Name, Attribute.Value): 200')
	  or diag($old[0]{body});
	is($old[1]{parsed}{Attributes}{VisibilityTimeout}, '42',
		'boto 2 GetQueueAttributes (AttributeName=All): every attribute, the one set among them');
	ok(exists $old[1]{parsed}{Attributes}{QueueArn}, 'AttributeName=All answers all of them');
	is_deeply([ keys %{ $old[2]{parsed}{Attributes} // {} } ], ['VisibilityTimeout'],
		'AttributeName=VisibilityTimeout: that one');
	is($old[3]{status}, 200, 'a send to the queue\'s path');
	my ($got) = grep { $_->{Body} eq 'from an old client' } @{ $old[4]{parsed}{Messages} // [] };
	ok($got, 'fog-aws ReceiveMessage (AttributeName=All): the message')
	  or diag($old[4]{body});
	like($got->{Attributes}{SentTimestamp} // '', qr/^\d{13}$/, 'with its attributes');
	is($old[5]{status}, 200, 'Attribute.Name beside Attribute.1.Value: one entry, the first')
	  or diag($old[5]{body});
	is($old[6]{status}, 400, 'AttributeName and AttributeName.1 with different names: refused');
	is($old[6]{code}, 'InvalidParameterValue', 'as InvalidParameterValue');
}

# --- AWS's own words ---------------------------------------------------------
# Messages as real SQS words them (LocalStack's SQS suite recorded them from
# AWS: test_sqs.snapshot.json), each in both protocols, and the requests
# SQS accepts where we refused before (DelaySeconds=0 on a FIFO message,
# FifoQueue=true again on a FIFO queue).
{
	my $wq = "$base/words";
	my $wf = "$base/words.fifo";
	my @made = wire(
		{ proto => 'json', action => 'CreateQueue',
		  input => { QueueName => 'words', Attributes => { DelaySeconds => '1', ReceiveMessageWaitTimeSeconds => '1' } } },
		{ proto => 'json', action => 'CreateQueue',
		  input => { QueueName => 'words.fifo', Attributes => { FifoQueue => 'true', ContentBasedDeduplication => 'true' } } });
	is_deeply([ map { $_->{status} } @made ], [ 200, 200 ], 'queues for the words');
	my $grp = 'can only include alphanumeric and punctuation characters. 1 to 128 in length.';
	my @words = (
		[ 'ReceiveMessage', { QueueUrl => $wq, MaxNumberOfMessages => 11 }, 'InvalidParameterValue',
		  'Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.' ],
		[ 'ReceiveMessage', { QueueUrl => $wq, WaitTimeSeconds => 21 }, 'InvalidParameterValue',
		  'Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.' ],
		[ 'ReceiveMessage', { QueueUrl => $wq, WaitTimeSeconds => -1 }, 'InvalidParameterValue',
		  'Value -1 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.' ],
		[ 'SendMessage', { QueueUrl => $wf, MessageBody => 'x', MessageGroupId => 'group 123' }, 'InvalidParameterValue',
		  "Value group 123 for parameter MessageGroupId is invalid. Reason: MessageGroupId $grp" ],
		[ 'SendMessage', { QueueUrl => $wf, MessageBody => 'x', MessageGroupId => 'g', MessageDeduplicationId => 'a' x 129 },
		  'InvalidParameterValue',
		  'Value ' . ('a' x 129) . " for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId $grp" ],
		[ 'SendMessage', { QueueUrl => $wf, MessageBody => 'x', MessageGroupId => 'g', DelaySeconds => 2 }, 'InvalidParameterValue',
		  'Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.' ],
		[ 'SendMessage', { QueueUrl => $wf, MessageBody => 'zero delay', MessageGroupId => 'g', DelaySeconds => 0 }, undef ],
		[ 'SetQueueAttributes', { QueueUrl => $wq, Attributes => { FifoQueue => 'true' } }, 'InvalidAttributeName',
		  'Unknown Attribute FifoQueue.' ],
		[ 'SetQueueAttributes', { QueueUrl => $wq, Attributes => { FifoQueue => 'false' } }, 'InvalidAttributeName',
		  'Unknown Attribute FifoQueue.' ],
		[ 'SetQueueAttributes', { QueueUrl => $wf, Attributes => { FifoQueue => 'true' } }, undef ],
		[ 'SetQueueAttributes', { QueueUrl => $wf, Attributes => { FifoQueue => 'false' } }, 'InvalidAttributeValue',
		  'Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.' ],
		[ 'CreateQueue', { QueueName => 'words-new', Attributes => { FifoQueue => 'false' } }, 'InvalidAttributeName',
		  'Unknown Attribute FifoQueue.' ],
		[ 'CreateQueue', { QueueName => 'words-new', Attributes => { ContentBasedDeduplication => 'false' } }, 'InvalidAttributeName',
		  'Unknown Attribute ContentBasedDeduplication.' ],
		[ 'CreateQueue', { QueueName => 'words-new', Attributes => { DeduplicationScope => 'queue' } }, 'InvalidAttributeName',
		  'You can specify the DeduplicationScope only when FifoQueue is set to true.' ],
		[ 'CreateQueue', { QueueName => 'words-new', Attributes => { FifoThroughputLimit => 'perQueue' } }, 'InvalidAttributeName',
		  'You can specify the FifoThroughputLimit only when FifoQueue is set to true.' ],
		[ 'CreateQueue', { QueueName => 'words', Attributes => { ReceiveMessageWaitTimeSeconds => '1', DelaySeconds => '2' } },
		  'QueueAlreadyExists', 'A queue already exists with the same name and a different value for attribute DelaySeconds' ],
		[ 'CreateQueue', { QueueName => 'words.fifo', Attributes => { FifoQueue => 'true', ContentBasedDeduplication => 'false' } },
		  'QueueAlreadyExists', 'A queue already exists with the same name and a different value for attribute ContentBasedDeduplication' ],
	);
	my @gone = wire(map { { proto => $_, action => 'GetQueueAttributes', input => { QueueUrl => $nosuch } } } 'json', 'query');
	is($gone[0]{message}, 'The specified queue does not exist.', 'json: a missing queue in SQS\'s words');
	is($gone[1]{message}, 'The specified queue does not exist for this wsdl version.',
		'query: a missing queue in SQS\'s Query words');
	for my $proto ('json', 'query')
	{
		my @ans = wire(map { { proto => $proto, action => $_->[0], input => $_->[1] } } @words);
		for my $i (0 .. $#words)
		{
			my ($action, $input, $code, $message) = @{ $words[$i] };
			my $what = "$proto $action " . join(',', map { ref $input->{$_} ? "$_=" . join(',', %{ $input->{$_} }) : $_ } sort keys %$input);
			if (!defined $code)
			{
				is($ans[$i]{status}, 200, "$what: accepted, as SQS accepts it") or diag($ans[$i]{body});
				next;
			}
			is($ans[$i]{code}, $code, "$what: $code") or diag($ans[$i]{body});
			is($ans[$i]{message}, $message, "$what: SQS's words");
		}
	}
	# Encryption attributes as SQS reports them (test_sse_queue_attributes,
	# test_set_queue_attributes_default_values): SqsManagedSseEnabled true
	# on a new queue; a KMS key turns it off and shows with its period until
	# it is set to empty; both kinds at once refused.
	for my $proto ('json', 'query')
	{
		my $sq = "$base/sse-$proto";
		my @names = ('SqsManagedSseEnabled', 'KmsMasterKeyId', 'KmsDataKeyReusePeriodSeconds');
		my @sse = wire(
			{ proto => $proto, action => 'CreateQueue', input => { QueueName => "sse-$proto" } },
			{ proto => $proto, action => 'GetQueueAttributes', input => { QueueUrl => $sq, AttributeNames => ['All'] } },
			{ proto => $proto, action => 'SetQueueAttributes',
			  input => { QueueUrl => $sq, Attributes => { KmsMasterKeyId => 'testKeyId', KmsDataKeyReusePeriodSeconds => '6000' } } },
			{ proto => $proto, action => 'GetQueueAttributes', input => { QueueUrl => $sq, AttributeNames => \@names } },
			{ proto => $proto, action => 'SetQueueAttributes',
			  input => { QueueUrl => $sq, Attributes => { KmsMasterKeyId => '', KmsDataKeyReusePeriodSeconds => '300' } } },
			{ proto => $proto, action => 'GetQueueAttributes', input => { QueueUrl => $sq, AttributeNames => \@names } },
			{ proto => $proto, action => 'SetQueueAttributes',
			  input => { QueueUrl => $sq, Attributes => { KmsMasterKeyId => 'k', SqsManagedSseEnabled => 'true' } } },
			{ proto => $proto, action => 'SetQueueAttributes', input => { QueueUrl => $sq, Attributes => { SqsManagedSseEnabled => 'true' } } },
			{ proto => $proto, action => 'GetQueueAttributes', input => { QueueUrl => $sq, AttributeNames => \@names } });
		is($sse[1]{parsed}{Attributes}{SqsManagedSseEnabled}, 'true', "$proto: a new queue reads SqsManagedSseEnabled true");
		ok(!exists $sse[1]{parsed}{Attributes}{KmsMasterKeyId}, "$proto: and no KMS key");
		is_deeply($sse[3]{parsed}{Attributes},
			{ SqsManagedSseEnabled => 'false', KmsMasterKeyId => 'testKeyId', KmsDataKeyReusePeriodSeconds => '6000' },
			"$proto: a KMS key turns SQS-managed encryption off");
		is_deeply($sse[5]{parsed}{Attributes}, { SqsManagedSseEnabled => 'false' },
			"$proto: an empty key is none; its period is not reported");
		is($sse[6]{code}, 'InvalidAttributeName', "$proto: both kinds at once: InvalidAttributeName");
		is($sse[6]{message},
			'You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE.',
			"$proto: in SQS's words");
		is_deeply($sse[8]{parsed}{Attributes}, { SqsManagedSseEnabled => 'true' }, "$proto: SQS-managed on again");
	}
	# Messages and batches as SQS takes them (LocalStack's test_sqs.py, its
	# snapshots AWS's answers): an empty String attribute refused in SQS's
	# words; a name of Unicode letters taken, "§" refused; "*" and "Hel.*"
	# select attributes; a FIFO batch entry without a group fails the whole
	# batch; a message at exactly MaximumMessageSize as SQS counts it
	# (body, names, types, values) goes; an answer with no failure has no
	# Failed list.
	for my $proto ('json', 'query')
	{
		my $mq = "$base/msgs-$proto";
		my $attrs = { 'Help.Me' => { DataType => 'String', StringValue => 'Me' },
			Hello => { DataType => 'String', StringValue => 'There' },
			General => { DataType => 'String', StringValue => 'Kenobi' } };
		my @m = wire(
			{ proto => $proto, action => 'CreateQueue',
			  input => { QueueName => "msgs-$proto", Attributes => { MaximumMessageSize => '2048', VisibilityTimeout => '0' } } },
			{ proto => $proto, action => 'SendMessage',
			  input => { QueueUrl => $mq, MessageBody => 'x', MessageAttributes => { ErrorDetails => { DataType => 'String', StringValue => '' } } } },
			{ proto => $proto, action => 'SendMessage',
			  input => { QueueUrl => $mq, MessageBody => 'x', MessageAttributes => { "attr.1\x{f8}\x{df}\x{e4}" => { DataType => 'String', StringValue => 'ok' } } } },
			{ proto => $proto, action => 'SendMessage',
			  input => { QueueUrl => $mq, MessageBody => 'x', MessageAttributes => { "Invalid-\x{a7}-attr" => { DataType => 'String', StringValue => 'v' } } } },
			{ proto => $proto, action => 'PurgeQueue', input => { QueueUrl => $mq } },
			{ proto => $proto, action => 'SendMessage', input => { QueueUrl => $mq, MessageBody => 'msg', MessageAttributes => $attrs } },
			{ proto => $proto, action => 'ReceiveMessage', input => { QueueUrl => $mq, MessageAttributeNames => ['*'] } },
			{ proto => $proto, action => 'ReceiveMessage', input => { QueueUrl => $mq, MessageAttributeNames => ['Hel.*'] } },
			{ proto => $proto, action => 'SendMessageBatch',
			  input => { QueueUrl => $wf, Entries => [ { Id => 'a', MessageBody => 'b', MessageGroupId => 'g' }, { Id => 'b', MessageBody => 'c' } ] } },
			{ proto => $proto, action => 'SendMessageBatch',
			  input => { QueueUrl => $mq, Entries => [
				  { Id => '1', MessageBody => 'a' x (2048 - 8), MessageAttributes => { k => { DataType => 'String', StringValue => 'x' } } },
				  { Id => '2', MessageBody => 'a' } ] } });
		is($m[1]{code}, 'InvalidParameterValue', "$proto: an empty String attribute is refused");
		is($m[1]{message}, "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'.",
			"$proto: in SQS's words");
		is($m[2]{status}, 200, "$proto: an attribute name of Unicode letters is taken") or diag($m[2]{body});
		is($m[3]{code}, 'InvalidParameterValue', "$proto: a name with a sign (\x{a7}) is not");
		is_deeply([ sort keys %{ $m[6]{parsed}{Messages}[0]{MessageAttributes} // {} } ], [ 'General', 'Hello', 'Help.Me' ],
			"$proto: MessageAttributeNames ['*'] is every attribute");
		is_deeply([ sort keys %{ $m[7]{parsed}{Messages}[0]{MessageAttributes} // {} } ], [ 'Hello', 'Help.Me' ],
			"$proto: ['Hel.*'] is those whose names start Hel");
		is($m[8]{status}, 400, "$proto: a FIFO batch with an entry without MessageGroupId fails whole");
		is($m[8]{code}, 'InvalidParameterValue', "$proto: InvalidParameterValue");
		is($m[8]{message}, 'The request must contain the parameter MessageGroupId.', "$proto: in SQS's words");
		is(scalar @{ $m[9]{parsed}{Successful} // [] }, 2,
			"$proto: a message at MaximumMessageSize as SQS counts it (body, names, types, values) is sent")
		  or diag($m[9]{body});
		ok(!exists $m[9]{parsed}{Failed}, "$proto: an answer without failures has no Failed list") if $proto eq 'json';

		# X-Ray's header on a send is the message's AWSTraceHeader
		my $trace = 'Root=1-3152b799-8954dae64eda91bc9a23a7e8;Parent=7fa8c0f79203be72;Sampled=1';
		my @t = (undef, wire(
			{ proto => $proto, action => 'SendMessage', input => { QueueUrl => "$base/words", MessageBody => 'traced' },
			  headers => { 'X-Amzn-Trace-Id' => $trace } },
			{ proto => $proto, action => 'ReceiveMessage',
			  input => { QueueUrl => "$base/words", AttributeNames => ['AWSTraceHeader'], MaxNumberOfMessages => 10,
				  WaitTimeSeconds => 2 } }));
		my ($tm) = grep { $_->{Body} eq 'traced' } @{ $t[2]{parsed}{Messages} // [] };
		is($tm->{Attributes}{AWSTraceHeader}, $trace, "$proto: X-Amzn-Trace-Id on a send is the message's AWSTraceHeader")
		  or diag($t[2]{body});
	}
	# ChangeMessageVisibility with the latest receipt after the lease ended
	# leases the message again, as SQS (LocalStack's
	# test_change_message_visibility_after_visibility_timeout_expiration and
	# test_extend_message_visibility_timeout_set_in_queue); a stale receipt
	# still changes nothing (DESIGN.md: InvalidParameterValue).
	for my $proto ('json', 'query')
	{
		my $vq = "$base/relet-$proto";
		my $fq = "$base/relet-$proto.fifo";
		my @r = wire(
			{ proto => $proto, action => 'CreateQueue', input => { QueueName => "relet-$proto", Attributes => { VisibilityTimeout => '1' } } },
			{ proto => $proto, action => 'SendMessage', input => { QueueUrl => $vq, MessageBody => 'again' } },
			{ proto => $proto, action => 'ReceiveMessage', input => { QueueUrl => $vq } },
			{ proto => $proto, action => 'CreateQueue', input => { QueueName => "relet-$proto.fifo",
				  Attributes => { FifoQueue => 'true', ContentBasedDeduplication => 'true', VisibilityTimeout => '1' } } },
			{ proto => $proto, action => 'SendMessage', input => { QueueUrl => $fq, MessageBody => 'f', MessageGroupId => 'g' } },
			{ proto => $proto, action => 'ReceiveMessage', input => { QueueUrl => $fq } });
		my $receipt = $r[2]{parsed}{Messages}[0]{ReceiptHandle};
		my $freceipt = $r[5]{parsed}{Messages}[0]{ReceiptHandle};
		sleep 2;
		# (LocalStack's test_fifo_delete_after_visibility_timeout: SQS refuses
		# a FIFO delete once the visibility timeout passed)
		my ($fd) = wire({ proto => $proto, action => 'DeleteMessage', input => { QueueUrl => $fq, ReceiptHandle => $freceipt } });
		is($fd->{code}, 'InvalidParameterValue', "$proto: a FIFO delete after the lease ended is refused");
		is($fd->{message}, "Value $freceipt for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
			"$proto: in SQS's words");
		is($node->safe_psql('postgres', "SELECT count(*) FROM queue.peek('relet-$proto.fifo')"), '1',
			"$proto: and the message stays");
		my @c = wire(
			{ proto => $proto, action => 'ChangeMessageVisibility', input => { QueueUrl => $vq, ReceiptHandle => $receipt, VisibilityTimeout => 30 } },
			{ proto => $proto, action => 'ReceiveMessage', input => { QueueUrl => $vq } },
			{ proto => $proto, action => 'ChangeMessageVisibility', input => { QueueUrl => $vq, ReceiptHandle => $receipt, VisibilityTimeout => 0 } },
			{ proto => $proto, action => 'ReceiveMessage', input => { QueueUrl => $vq } },
			{ proto => $proto, action => 'ChangeMessageVisibility', input => { QueueUrl => $vq, ReceiptHandle => $receipt, VisibilityTimeout => 0 } });
		is($c[0]{status}, 200, "$proto: the latest receipt after its lease ended leases the message again") or diag($c[0]{body});
		is(scalar @{ $c[1]{parsed}{Messages} // [] }, 0, "$proto: ... so it is not received meanwhile");
		is(scalar @{ $c[3]{parsed}{Messages} // [] }, 1, "$proto: handed back (0), it is received again");
		is($c[4]{code}, 'InvalidParameterValue', "$proto: the receipt, stale now, changes nothing: InvalidParameterValue");
	}
	is($node->safe_psql('postgres', "SELECT count(*) FROM queue.peek('words.fifo') WHERE body = 'zero delay'"),
		'1', 'the FIFO message sent with DelaySeconds=0 is there (once: the second protocol\'s is its duplicate by content)');
}

# --- A queue's URL as the endpoint (LocalStack's TestSqsQueryApi, AWS's
# answers): the account's actions are InvalidAction there, an empty
# receive is one empty result element, and the URL asked for with nothing
# is 404 with an UnknownOperationException document.
{
	my $qpath = '/123456789012/oldforms';
	my @qa = wire(
		{ proto => 'query', action => 'CreateQueue', path => $qpath, params => [ [ 'QueueName', 'viaqueueurl' ] ] },
		{ proto => 'query', action => 'ListQueues', path => $qpath },
		{ proto => 'query', action => 'GetQueueUrl', path => $qpath, params => [ [ 'QueueName', 'q1' ] ] },
		{ proto => 'query', action => 'ReceiveMessage', path => '/123456789012/words' });
	is($qa[0]{code}, 'InvalidAction', 'CreateQueue at a queue\'s URL: InvalidAction');
	is($qa[0]{message}, 'The action CreateQueue is not valid for this endpoint.', '... in SQS\'s words');
	is($qa[1]{code}, 'InvalidAction', 'ListQueues at a queue\'s URL: InvalidAction');
	is($qa[2]{status}, 200, 'GetQueueUrl at a queue\'s URL is served (as SQS serves it)');
	like($qa[3]{body}, qr{<ReceiveMessageResult/><ResponseMetadata>}, 'an empty receive: <ReceiveMessageResult/>');
	is($node->safe_psql('postgres', "SELECT count(*) FROM queue.queues WHERE queue_name = 'viaqueueurl'"),
		'0', 'no queue was made');
	my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Proto => 'tcp');
	print $s "GET $qpath HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\nConnection: close\r\n\r\n";
	my $raw = do { local $/; <$s> };
	close $s;
	like($raw, qr{^HTTP/1\.1 404}, 'a queue\'s URL asked for with nothing: 404');
	like($raw, qr{<UnknownOperationException/>}, '... an UnknownOperationException document, in XML whatever Accept says');
}

# --- Query answered in JSON when the client asks for it (Accept:
# application/json), as SQS's Query API does (LocalStack's
# test_get_list_queues_with_query_auth): the answer and its errors.
{
	my @j = wire(
		{ proto => 'query', action => 'ListQueues', headers => { Accept => 'application/json' } },
		{ proto => 'query', action => 'GetQueueUrl', input => { QueueName => 'nosuch' }, headers => { Accept => 'application/json' } },
		{ proto => 'query', action => 'ListQueues' });
	like($j[0]{ctype}, qr{^application/json}, 'Query with Accept: application/json: a JSON answer');
	ok(ref $j[0]{json}{ListQueuesResponse}{ListQueuesResult}{QueueUrls} eq 'ARRAY',
		'... {"ListQueuesResponse": {"ListQueuesResult": {"QueueUrls": [...]}}}') or diag($j[0]{body});
	like($j[0]{json}{ListQueuesResponse}{ResponseMetadata}{RequestId} // '', qr/^[0-9a-f-]{36}$/, '... with its request id');
	is($j[1]{code}, 'AWS.SimpleQueueService.NonExistentQueue', '... an error as {"Error": {"Code": ...}}');
	like($j[2]{body}, qr{^<\?xml}, 'without Accept it is XML');
}

# --- A move task whose destination is deleted fails with SQS's
# FailureReason (LocalStack's test_move_task_delete_destination_queue_while_running)
{
	my $arnp = 'arn:aws:sqs:us-east-1:123456789012';
	my @mv = wire(
		{ proto => 'json', action => 'CreateQueue', input => { QueueName => 'mvd-dlq' } },
		{ proto => 'json', action => 'CreateQueue', input => { QueueName => 'mvd-src',
			  Attributes => { RedrivePolicy => encode_json({ deadLetterTargetArn => "$arnp:mvd-dlq", maxReceiveCount => 1 }) } } },
		{ proto => 'json', action => 'CreateQueue', input => { QueueName => 'mvd-dest' } },
		(map { { proto => 'json', action => 'SendMessage', input => { QueueUrl => "$base/mvd-dlq", MessageBody => "m$_" } } } 1 .. 5),
		{ proto => 'json', action => 'StartMessageMoveTask',
		  input => { SourceArn => "$arnp:mvd-dlq", DestinationArn => "$arnp:mvd-dest", MaxNumberOfMessagesPerSecond => 1 } },
		{ proto => 'json', action => 'DeleteQueue', input => { QueueUrl => "$base/mvd-dest" } });
	is($mv[8]{status}, 200, 'a move task to a queue that is then deleted') or diag($mv[8]{body});
	my $task = {};
	for (1 .. 100)
	{
		my ($l) = wire({ proto => 'json', action => 'ListMessageMoveTasks', input => { SourceArn => "$arnp:mvd-dlq" } });
		$task = $l->{parsed}{Results}[0] // {};
		last if ($task->{Status} // '') ne 'RUNNING';
		select(undef, undef, undef, 0.1);
	}
	is($task->{Status}, 'FAILED', 'the task fails');
	is($task->{FailureReason}, 'AWS.SimpleQueueService.NonExistentQueue', 'its FailureReason is SQS\'s');
}

# Nothing of the endpoint stays in a transaction after all that.
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' OR (backend_xid IS NOT NULL AND backend_type <> 'client backend')"
	),
	'0',
	'no session sits in a transaction');
# The server's log has the internal errors' real messages only: none here.
unlike(slurp_file($node->logfile), qr/SQS request failed/, 'no internal error was answered');

$node->stop;
done_testing();
