# HeldSnapshot: what the tests of the worker's work under a held snapshot
# share (038_recycle, 039_compact):
#
#   my $holder = HeldSnapshot::hold($node);   # an open transaction id, no snapshot
#   HeldSnapshot::hold($node, 'snapshot');   # REPEATABLE READ, snapshot taken
#   HeldSnapshot::burn_xids($node);           # the horizon 1,100 xids behind
#   HeldSnapshot::filenode($node, 'q7'); HeldSnapshot::blocks($node, 'q7');
#   HeldSnapshot::mallory_trap($node);        # role mallory, public.fired, public.trap()
#   HeldSnapshot::poke($node, 'q');          # a send, received and deleted
#
# public.trap() is a trigger function mallory wrote: it records the user it
# runs as in public.fired and tries to make mallory a superuser.  A test
# that attaches it (as a superuser: queue_data is no one else's to reach)
# checks that the worker never runs it.
package HeldSnapshot;

use strict;
use warnings;

# hold($node, $kind): a session that holds the horizon back.  'xid' (the
# default): READ COMMITTED, idle in transaction after taking a transaction
# id, as an application's transaction between two statements; it holds no
# snapshot, so the worker may recycle and compact under it (worker/horizon.c).
# 'snapshot': REPEATABLE READ with its snapshot taken, which could read any
# table as of then: nothing may be removed under it.
sub hold
{
	my ($node, $kind) = @_;
	my $holder = $node->background_psql('postgres');
	if (($kind // 'xid') eq 'snapshot')
	{
		$holder->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
		$holder->query_safe('SELECT count(*) FROM pg_catalog.pg_class');
	}
	else
	{
		$holder->query_safe('BEGIN');
		$holder->query_safe('SELECT pg_catalog.txid_current()');
	}
	return $holder;
}

# Move the horizon's lag past 1,000 transaction ids (a holder keeps it).
sub burn_xids
{
	my ($node) = @_;
	$node->safe_psql('postgres', q(DO $$ BEGIN
		FOR i IN 1 .. 1100 LOOP PERFORM pg_catalog.txid_current(); COMMIT; END LOOP;
	END $$));
}

# poke($node, $queue): a send, received and deleted: a commit that has the
# worker visit the queue and leaves its counters as they were
sub poke
{
	my ($node, $queue) = @_;
	$node->safe_psql('postgres', qq(SELECT queue.send('$queue', 'poke')));
	$node->safe_psql('postgres', qq(
		WITH r AS (SELECT receipt FROM queue.receive('$queue'))
		SELECT count(*) FROM queue.delete_batch('$queue', ARRAY(SELECT receipt FROM r))));
}

sub filenode
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres', "SELECT pg_relation_filenode('queue_data.$table')");
}

sub blocks
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres', "SELECT pg_relation_size('queue_data.$table') / 8192");
}

sub mallory_trap
{
	my ($node) = @_;
	$node->safe_psql('postgres', q(
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO mallory;
CREATE TABLE public.fired (who text);
GRANT INSERT ON public.fired TO mallory;
));
	$node->safe_psql('postgres', q(
CREATE FUNCTION public.trap() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.fired VALUES (current_user);
	BEGIN EXECUTE 'ALTER ROLE mallory SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
	RETURN NULL;
END $$;
), extra_params => [ '-U', 'mallory' ]);
}

1;
