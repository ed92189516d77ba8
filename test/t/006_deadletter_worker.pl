# The worker moves messages that used up max_receive_count to the
# dead-letter queue when their lease ends, with nobody receiving, so the
# dead-letter queue's depth is true without receivers: standard and FIFO
# (where the move unblocks the group).  Messages still leased, or with
# receives left, stay.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;

my $node = QueueWorkerNode::start('deadletter');

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

# --- Standard queue -------------------------------------------------------

sql("SELECT queue.create('wdlq')");
sql("SELECT queue.create('wsrc', dead_letter_queue => 'wdlq', max_receive_count => 1)");
sql("SELECT count(*) FROM queue.send('wsrc', 'poison', attributes => '{\"k\": \"v\"}')");
is(sql("SELECT body || ':' || receive_count FROM queue.receive('wsrc', visibility_timeout => '1 s')"),
	'poison:1', 'the poison message is received once, with a 1 s lease');
# Received again with a long lease: its lease does not end during the test.
sql("SELECT count(*) FROM queue.send('wsrc', 'held')");
is(sql("SELECT body FROM queue.receive('wsrc', visibility_timeout => '1 hour')"),
	'held', 'a second message is leased for an hour');
# A message with receives left.
sql("SELECT count(*) FROM queue.send('wsrc', 'fresh')");

ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM queue.peek('wdlq')", '1'),
	'the worker moves the poison message when its lease ends, with nobody receiving');
is( sql(
		"SELECT format('%s %s %s %s %s', body, receive_count, attributes ->> 'k',"
		  . " attributes -> 'queue.dead_letter' ->> 'source_queue',"
		  . " attributes -> 'queue.dead_letter' ->> 'reason') FROM queue.peek('wdlq')"),
	'poison 1 v wsrc max_receive_count',
	'it keeps body, attributes and receive count (no further receive), and names its source');
is(sql("SELECT string_agg(body, ',' ORDER BY body) FROM queue.peek('wsrc')"),
	'fresh,held', 'the leased message and the one with receives left stay');
is( sql(
		"SELECT format('%s %s', s.dead_lettered, d.visible) FROM queue.stats s, queue.stats d"
		  . " WHERE s.queue_name = 'wsrc' AND d.queue_name = 'wdlq'"),
	'1 1', 'queue.stats: dead_lettered of the source, depth of the dead-letter queue');

# --- FIFO: the move unblocks the group --------------------------------------

sql("SELECT queue.create('wfdlq', fifo => true)");
sql("SELECT queue.create('wfsrc', fifo => true, dead_letter_queue => 'wfdlq', max_receive_count => 1)");
sql("SELECT count(*) FROM queue.send_batch('wfsrc', ARRAY['f1', 'f2', 'f3'],"
	  . " message_group_ids => ARRAY['g', 'g', 'g'], deduplication_ids => ARRAY['f1', 'f2', 'f3'])");
is(sql("SELECT body FROM queue.receive('wfsrc', visibility_timeout => '1 s')"),
	'f1', 'FIFO: the head of the group is received once, with a 1 s lease');
ok( $node->poll_query_until(
		'postgres', "SELECT string_agg(body || ':' || message_group_id, ',') FROM queue.peek('wfdlq')",
		'f1:g'),
	'FIFO: the worker moves it to the FIFO dead-letter queue, group kept');
is( sql(
		"SELECT string_agg(body || ':' || receive_count, ',') FROM queue.receive('wfsrc', 10, visibility_timeout => '1 hour')"),
	'f2:1,f3:1', 'FIFO: the rest of the group then flows, in order');

# --- Redrive puts it back, at the head of its group -------------------------

is(sql("SELECT queue.redrive('wfdlq')"), '1', 'redrive moves it back');
is(sql("SELECT string_agg(body || ':' || receive_count, ',') FROM queue.peek('wfsrc')"),
	'f1:0,f2:1,f3:1', 'ahead of the messages it was ahead of, receive count 0');

# --- A notice from inside redrive: its text and the caller's context ------

# (src/api/errors.c: the mark that finds the internals' lines of an error
# is not put on a notice; the caller's own lines stay.)
sql("SELECT queue.drop('wsrc')");
my ($out, $err) = ('', '');
$node->psql(
	'postgres',
	"\\set SHOW_CONTEXT always\nDO \$\$ BEGIN PERFORM queue.redrive('wdlq'); END \$\$",
	stdout => \$out,
	stderr => \$err);
like($err, qr/NOTICE:  message \d+ has no source queue to go back to; it stays/,
	'a redrive whose source is gone says so in a notice');
like(
	$err,
	qr/CONTEXT:  SQL statement "SELECT queue.redrive\('wdlq'\)"\nPL\/pgSQL function inline_code_block line 1 at PERFORM\n*\z/,
	'the notice\'s context is the caller\'s statement and block, and only that');
unlike($err, qr/\x1f|queue\._/, 'nothing of the internals, nor the mark');

$node->stop;
done_testing();
