# docs/sqs-api.md's "Set up, step by step" runs as written (issue 36): the
# blocks between <!-- sqs-setup:begin --> and <!-- sqs-setup:end --> are
# read from the page itself (never a copy) and run in order on a fresh
# cluster: the postgresql.conf lines appended, the database created (psql),
# the server restarted (step 3 names no command of its own), the
# extension, role, grants and key (psql, whose \connect the block uses),
# and the shell block's aws calls (Debian's awscli).  The only change is
# the port: the page's 9324 becomes a free one.  Then the message sent is
# in the queue for SQL.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $aws = '/usr/bin/aws';
plan skip_all => 'no Debian awscli' unless -x $aws;

my $page = "$FindBin::RealBin/../../docs/sqs-api.md";
my $text = slurp_file($page);
my ($setup) = $text =~ /<!-- sqs-setup:begin -->\n(.*?)<!-- sqs-setup:end -->/s;
ok(defined $setup, 'the page has its set-up section');
my @blocks;
while ($setup =~ /^```(\w*)\n(.*?)^```$/msg)
{
	push @blocks, { lang => $1, text => $2 };
}
is(join(' ', map { $_->{lang} || 'plain' } @blocks), 'plain sql sql sh',
	'four blocks: postgresql.conf, the database, the rest in SQL, the first call');

my $port = PostgreSQL::Test::Cluster::get_free_port();
$_->{text} =~ s/\b9324\b/$port/g foreach @blocks;

my $node = PostgreSQL::Test::Cluster->new('sqs_setup');
$node->init;
$node->start;

# 1. postgresql.conf
$node->append_conf('postgresql.conf', $blocks[0]{text});
# 2. the database, as a superuser
my ($rc, $out, $err) = $node->psql('postgres', $blocks[1]{text}, on_error_stop => 1);
is($rc, 0, 'step 2 (the database) runs') or diag($err);
# 3. restart
$node->restart;
# 4. extension, role, grants, key: one psql session from postgres
($rc, $out, $err) = $node->psql('postgres', $blocks[2]{text}, on_error_stop => 1);
is($rc, 0, 'step 4 (extension, role, grants, key) runs') or diag($err);
like($out, qr/AKIDAPPEXAMPLE\|app-secret-change-me/, 'step 4 made the key the block names');
$node->wait_for_log(qr/queue sqs worker 0 listening/);

# 5. the first call, with nothing of AWS's but what the block exports
my $home = PostgreSQL::Test::Utils::tempdir;
my $stdout;
{
	local %ENV = (PATH => "/usr/bin:/bin", HOME => $home, LANG => 'C.UTF-8',
		AWS_CONFIG_FILE => "$home/none", AWS_SHARED_CREDENTIALS_FILE => "$home/none",
		AWS_EC2_METADATA_DISABLED => 'true');
	$rc = IPC::Run::run([ 'bash', '-e', '-c', $blocks[3]{text} ],
		'<', \undef, '>', \$stdout, '2>', \$err, IPC::Run::timeout(120));
}
ok($rc, 'step 5 (the aws calls) runs') or diag($err);
like($stdout, qr{"QueueUrl": "http://127.0.0.1:$port/000000000000/jobs"}, 'create-queue answered the queue URL');
like($stdout, qr/"MessageId": "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"/,
	'send-message answered a UUID');
is($node->safe_psql('app', q(SET ROLE sqs_app; SELECT body FROM queue.peek('jobs'))), 'hello',
	'the message is in the queue for SQL, as the page says');
$node->stop;
done_testing();
