#!/usr/bin/env perl
# test/fuzz/fuzz_calls.pl: a random SQL-call fuzzer for the queue extension.
#
# Against a running server (the usual PG* environment variables say which;
# psql must be on PATH or in PSQL), in a database where the extension and
# the queues of test/fuzz/run.sh exist, it builds FUZZ_ITERATIONS (default
# 2000) random calls of random API functions with arguments drawn from
# values chosen to hurt: NULL, empty, huge, negative, boundaries, random
# characters, real and forged and stale receipts, real queue names and
# names shaped like SQL injection.  Each call runs in its own subtransaction
# through pg_temp.fz(), which records its SQLSTATE; calls that could wreck
# the fixed queues (drop, purge, alter) are always rolled back, the others
# half the time; one call in five runs as the role fz_role (FUZZ_ROLE),
# which run.sh gives a few privileges on a few queues.
#
# The run fails (exit 1) if any call gives XX000 (internal error) or P0001
# (a bare RAISE), if the server connection is lost (a crash), or if a call
# hangs (statement_timeout, FUZZ_CALL_TIMEOUT seconds, default 30).  It
# prints how many inputs were tried and the histogram of SQLSTATEs; with
# FUZZ_VERBOSE=1 every call and its SQLSTATE; FUZZ_SEED makes a run
# repeatable (the seed is printed).
use strict;
use warnings;
use utf8;
use Encode qw(encode_utf8);
use MIME::Base64 qw(encode_base64);
no warnings 'nonchar';
binmode(STDOUT, ':utf8');

my $iterations = $ENV{FUZZ_ITERATIONS} // 2000;
my $seed = $ENV{FUZZ_SEED} // (time() ^ ($$ << 8)) % 1000000007;
my $call_timeout = $ENV{FUZZ_CALL_TIMEOUT} // 30;
my $chunk = $ENV{FUZZ_CHUNK} // 250;
my $psql = $ENV{PSQL} // 'psql';
my $verbose = $ENV{FUZZ_VERBOSE} // 0;
my $role = $ENV{FUZZ_ROLE} // 'fz_role';
srand($seed);

die "FUZZ_ITERATIONS must be a positive number\n" unless $iterations =~ /^\d+$/ && $iterations > 0;

# --- values ------------------------------------------------------------------

sub pick { return $_[ int(rand(@_)) ]; }
sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'"; }

# Random text: printable ASCII, Latin-1, anything up to U+10FFFF (no NUL,
# no surrogates), or a mix; as a SQL literal.
sub random_text {
	my $len = pick(0, 1, 2, 5, 13, 44, 80, 81, 128, 129, 300);
	my $kind = int(rand(4));
	my $s = '';
	for (1 .. $len) {
		my $c;
		if ($kind == 0) { $c = 32 + int(rand(95)); }
		elsif ($kind == 1) { $c = 1 + int(rand(255)); }
		elsif ($kind == 2) {
			do { $c = 1 + int(rand(0x10FFFF)); } while ($c >= 0xD800 && $c <= 0xDFFF);
		}
		else { $c = pick(32 + int(rand(95)), 1 + int(rand(31)), 0x80 + int(rand(0x780)), 0x1F600); }
		$s .= chr($c);
	}
	return lit($s);
}

my @queues = qw(fz_std fz_fifo fz_small fz_dlq fz_src fz_fifo_dlq fz_fifo_src);
my @scratch = qw(fz_s1 fz_s2 fz_s3 fz_s4);
my @bad_names = (
	"''", "' '", lit("x'; DROP TABLE queue._queues; --"), lit('q"; SELECT 1'),
	lit('my queue'), lit('очередь'), lit("q\x{200B}"), lit('q%s%n'), lit("q\\"),
	"repeat('n', 81)", "repeat('n', 100000)", "repeat('é', 41)", lit('FZ_STD'),
	lit('no_such_queue'), lit('queue_data.q1'), lit('_queues'), lit('..'), lit('-'),
	lit("fz_std\n"), lit(' fz_std'),
);

my @topics = qw(fz_topic fz_topic_fifo);
my @scratch_topics = qw(fz_t1 fz_t2);

sub topic_name {
	my $r = rand();
	return 'NULL' if $r < 0.04;
	return lit(pick(@topics)) if $r < 0.70;
	return lit(pick(@scratch_topics)) if $r < 0.85;
	return random_text() if $r < 0.90;
	return pick(@bad_names);
}

sub tags {
	return pick('NULL::text[]', "'{}'::text[]", "'{a}'::text[]", "'{a,b,c,d,e}'::text[]",
		"'{a,b,c,d,e,f}'::text[]", "ARRAY[repeat('t', 17)]", "ARRAY['a', NULL]",
		"'{{a},{b}}'::text[]", "ARRAY[" . random_text() . "]");
}

sub routing_key {
	return pick('NULL', "'a.b'", "'a'", "'a..b'", "'.a'", "'a.'", "''", "repeat('k', 65)",
		"'#'", "'*.*'", random_text());
}

# Filter policies: valid ones and every kind of malformed one.
sub policy {
	return pick('NULL::jsonb', "'{}'::jsonb", "'[]'::jsonb", "'1'::jsonb", "'{\"k\": \"v\"}'::jsonb",
		"'{\"k\": [\"v\", 1, null, true]}'::jsonb", "'{\"k\": []}'::jsonb",
		"'{\"k\": [{\"numeric\": [\">\", 0, \"<\", 10]}]}'::jsonb",
		"'{\"k\": [{\"numeric\": [\">\"]}]}'::jsonb", "'{\"k\": [{\"numeric\": \"x\"}]}'::jsonb",
		"'{\"k\": [{\"anything-but\": []}]}'::jsonb", "'{\"k\": [{\"anything-but\": {\"prefix\": 1}}]}'::jsonb",
		"'{\"k\": [{\"exists\": 1}]}'::jsonb", "'{\"k\": [{}]}'::jsonb", "'{\"k\": [[1]]}'::jsonb",
		"'{\"\$or\": [{\"a\": [1]}, {\"b\": [2]}]}'::jsonb", "'{\"\$or\": 1}'::jsonb", "'{\"\$or\": [1, 2]}'::jsonb",
		"'{\"a\": {\"b\": {\"c\": [1e300]}}}'::jsonb", "'{\"a\": {}}'::jsonb",
		"jsonb_build_object(" . random_text() . ", jsonb_build_array(1))");
}

sub topic_privileges {
	return pick('NULL::text[]', "'{}'::text[]", "'{publish}'::text[]", "'{manage}'::text[]",
		"'{publish,manage}'::text[]", "'{send}'::text[]", "ARRAY['publish', NULL]",
		"ARRAY[" . random_text() . "]");
}

sub queue_name {
	my $r = rand();
	return 'NULL' if $r < 0.04;
	return lit(pick(@queues)) if $r < 0.70;
	return lit(pick(@scratch)) if $r < 0.80;
	return random_text() if $r < 0.85;
	return pick(@bad_names);
}

sub int4 {
	return pick('1', '2', '5', '10') if rand() < 0.4;
	return pick('NULL', '0', '1', '-1', '2', '10', '999', '1000', '1001', '2147483647',
		'-2147483648', '100', int(rand(2000)) - 500);
}

sub int8 {
	return pick('NULL', '0', '1', '-1', '10', '1000', '2147483648', '9223372036854775807',
		'-9223372036854775808', int(rand(100)));
}

sub boolean { return pick('NULL', 'true', 'false'); }

# Intervals for leases, delays, retention, windows: half of them valid
# almost everywhere.
sub interval {
	return pick(map { lit($_) . '::interval' } ('0', '1 second', '30 seconds', '1 minute'))
		if rand() < 0.4;
	return pick('NULL::interval', map { lit($_) . '::interval' } (
		'0', '1 microsecond', '1 second', '-1 second', '30 seconds', '1 minute', '5 minutes',
		'12 hours', '12 hours 1 second', '4 days', '14 days', '14 days 1 second', '7 days',
		'20 seconds', '19 seconds', '1 mon', '1 mon -30 days', '-1 mon 30 days 1 second',
		'1000 years', '-1000 years', '178000000 years', '-178000000 years',
		'2147483647 days', '-2147483648 mons'));
}

# Intervals for a receive's wait or a queue's receive_wait: never one that
# would make a receive sleep for long.
sub wait_interval {
	return pick('NULL::interval', map { lit($_) . '::interval' } (
		'0', '1 microsecond', '10 milliseconds', '-1 second', '21 seconds', '1000 years',
		'-1000 years', '1 mon -30 days', '-2147483648 mons'));
}

sub token {
	my $r = rand();
	return 'NULL' if $r < 0.25;
	return pick("'g'", "'g2'", "'group-1'", "'d1'", "'d2'", "''", "repeat('g', 128)",
		"repeat('g', 129)", lit("x';DROP_TABLE_queue._queues;--"), lit('a b'), lit("é"),
		lit('%s%n')) if $r < 0.8;
	return random_text();
}

sub body_text {
	my $r = rand();
	return 'NULL::text' if $r < 0.05;
	return pick("''", "'x'", "'hello'", "repeat('x', 10)", "repeat('x', 11)",
		"repeat('x', 1048576)", "repeat('x', 1048577)", "repeat('é', 524289)",
		"repeat('x', 2097152)") . '::text' if $r < 0.35;
	return random_text() . '::text';
}

sub body_jsonb {
	return pick('NULL::jsonb', "'{}'::jsonb", "'[]'::jsonb", "'null'::jsonb", "'1'::jsonb",
		"'\"s\"'::jsonb", "'{\"a\": [1, 2, {\"b\": null}]}'::jsonb",
		"jsonb_build_object('k', repeat('x', 2097152))",
		"jsonb_build_object('k', repeat('x', 1048560))",
		"to_jsonb(" . random_text() . "::text)");
}

sub jsonb_obj {
	return pick('NULL::jsonb', "'{}'::jsonb", "'{\"k\": \"v\"}'::jsonb", "'[]'::jsonb",
		"'\"s\"'::jsonb", "'null'::jsonb", "'1'::jsonb",
		"jsonb_build_object('k', repeat('v', 100000))");
}

sub array_of {
	my ($gen, $type) = @_;
	my $r = rand();
	return "NULL::$type\[]" if $r < 0.08;
	return "ARRAY[]::$type\[]" if $r < 0.14;
	return "array_fill(NULL::$type, ARRAY[1001])" if $r < 0.16;
	return "array_fill(" . ($type eq 'jsonb' ? "'{}'" : "'x'") . "::$type, ARRAY[1001])" if $r < 0.18;
	return "ARRAY[[" . $gen->() . ", " . $gen->() . "]]::$type\[]" if $r < 0.22;
	my $n = pick(1, 1, 2, 3, 5, 10);
	return "ARRAY[" . join(', ', map { $gen->() } 1 .. $n) . "]::$type\[]";
}

# Receipts: ones receives really gave (stored by the calls below, so often
# stale or of another queue), mangled ones, and garbage.
sub receipt {
	my $real = "(SELECT receipt FROM fz_receipts ORDER BY random() LIMIT 1)";
	my $r = rand();
	return 'NULL' if $r < 0.05;
	return $real if $r < 0.45;
	return "(SELECT receipt FROM fz_receipts ORDER BY id DESC LIMIT 1)" if $r < 0.60;
	return pick(
		"overlay($real PLACING 'A' FROM " . (1 + int(rand(44))) . " FOR 1)",
		"left($real, " . int(rand(44)) . ")", "$real || 'A'", "lower($real)", "reverse($real)",
		"repeat('A', 44)", "'AQ' || repeat('A', 42)", "repeat('é', 22)", "repeat('-_', 22)",
		"''", lit("x'; DROP TABLE queue._queues; --"), "repeat('A', 100000)",
		"encode(sha256(random()::text::bytea), 'base64')", random_text());
}

sub role_name {
	return pick('NULL', "'public'", "'PUBLIC'", "'fz_role'", "'fz_role '", "''",
		"'no_such_role'", lit("fz_role'; DROP ROLE fz_role; --"), "current_user::text",
		random_text());
}

sub privileges {
	return pick('NULL::text[]', "'{}'::text[]", "'{send}'::text[]", "'{receive}'::text[]",
		"'{manage}'::text[]", "'{send,receive,manage}'::text[]", "'{SEND}'::text[]",
		"'{bogus}'::text[]", "ARRAY['send', NULL]", "'{{send},{receive}}'::text[]",
		"ARRAY[" . random_text() . "]");
}

my @consumers = qw(fz_c1 fz_c2);

sub consumer_name {
	my $r = rand();
	return 'NULL' if $r < 0.05;
	return lit(pick(@consumers)) if $r < 0.80;
	return random_text() if $r < 0.88;
	return pick(@bad_names);
}

sub handler {
	return pick("'public.fz_handler(queue.message[])'", "'public.fz_handler(queue.message[])'",
		"'public.fz_h_session(queue.message[])'",
		"'public.fz_not_handler(int)'", "'pg_catalog.now()'", 'NULL', "'public.fz_nothing(int)'",
		random_text());
}

sub retry_kind { return pick("'exponential'", "'fixed'", 'NULL', "''", random_text()); }

sub dedup_scope { return pick('NULL', "'queue'", "'message_group'", "''", "'group'", random_text()); }

sub redrive_allow {
	return pick('NULL::text[]', "'{}'::text[]", "ARRAY['fz_src']", "ARRAY['fz_src', NULL]",
		"ARRAY[" . random_text() . "]", "ARRAY[repeat('n', 81)]");
}

# --- calls ---------------------------------------------------------------------

# Optional named arguments: each given with probability 1/2.
sub named {
	my @out;
	while (@_) {
		my ($name, $gen) = splice(@_, 0, 2);
		push @out, "$name => " . $gen->() if rand() < 0.3;
	}
	return @out;
}

sub call_sql {
	my ($fn, @args) = @_;
	return "SELECT queue.$fn(" . join(', ', @args) . ")";
}

my @attr_args = (
	visibility_timeout => \&interval, delay => \&interval, retention => \&interval,
	max_message_size => \&int4, receive_wait => \&wait_interval,
	content_based_deduplication => \&boolean, deduplication_window => \&interval,
	deduplication_scope => \&dedup_scope,
	dead_letter_queue => sub { rand() < 0.5 ? queue_name() : "''" },
	max_receive_count => \&int4, redrive_allow => \&redrive_allow, retry_delay => \&interval,
	tags => \&jsonb_obj);

# Each entry: name => sub returning (sql, rollback).
my %calls = (
	create => sub {
		my $name = rand() < 0.6 ? lit(pick(@scratch)) : queue_name();
		return (call_sql('create', $name, named(fifo => \&boolean, @attr_args)), rand() < 0.3);
	},
	alter => sub { return (call_sql('alter', queue_name(), named(@attr_args)), 1); },
	drop => sub {
		my $name = rand() < 0.5 ? lit(pick(@scratch)) : queue_name();
		my $scratch = $name =~ /^'fz_s\d'$/;
		return (call_sql('drop', $name, named(if_exists => \&boolean, force => \&boolean)), !$scratch);
	},
	purge => sub { return (call_sql('purge', queue_name()), 1); },
	send => sub {
		my $body = rand() < 0.5 ? body_text() : body_jsonb();
		return (call_sql('send', queue_name(), $body,
			named(delay => \&interval, message_group_id => \&token, deduplication_id => \&token,
				attributes => \&jsonb_obj)), rand() < 0.5);
	},
	send_batch => sub {
		my $bodies = rand() < 0.5 ? array_of(\&body_text, 'text') : array_of(\&body_jsonb, 'jsonb');
		return (call_sql('send_batch', queue_name(), $bodies,
			named(delay => \&interval, message_group_ids => sub { array_of(\&token, 'text') },
				deduplication_ids => sub { array_of(\&token, 'text') },
				attributes => sub { array_of(\&jsonb_obj, 'jsonb') })), rand() < 0.5);
	},
	receive => sub {
		# Keep the receipts a receive gives, for the calls that take them.
		my $q = queue_name();
		my $args = join(', ', $q, named(max_messages => \&int4, visibility_timeout => \&interval,
				wait => \&wait_interval, receive_attempt_id => \&token));
		return ("INSERT INTO fz_receipts (receipt) SELECT receipt FROM queue.receive($args)", rand() < 0.3);
	},
	delete => sub { return (call_sql('delete', queue_name(), receipt()), rand() < 0.5); },
	delete_batch => sub {
		return (call_sql('delete_batch', queue_name(), array_of(\&receipt, 'text')), rand() < 0.5);
	},
	change_visibility => sub {
		return (call_sql('change_visibility', queue_name(), receipt(), interval()), rand() < 0.5);
	},
	change_visibility_batch => sub {
		return (call_sql('change_visibility_batch', queue_name(), array_of(\&receipt, 'text'),
			interval()), rand() < 0.5);
	},
	peek => sub { return (call_sql('peek', queue_name(), named(max_messages => \&int4)), 0); },
	redrive => sub {
		return (call_sql('redrive', queue_name(),
			named(destination_queue => \&queue_name, max_messages => \&int8)), 1);
	},
	grant => sub { return (call_sql('grant', queue_name(), role_name(), privileges()), 1); },
	revoke => sub { return (call_sql('revoke', queue_name(), role_name(), privileges()), 1); },
	stats => sub { return ("SELECT * FROM queue.stats", 0); },
	create_topic => sub {
		my $name = rand() < 0.6 ? lit(pick(@scratch_topics)) : topic_name();
		return (call_sql('create_topic', $name, named(fifo => \&boolean, tags => \&jsonb_obj)), rand() < 0.3);
	},
	drop_topic => sub {
		my $name = rand() < 0.5 ? lit(pick(@scratch_topics)) : topic_name();
		my $scratch = $name =~ /^'fz_t\d'$/;
		return (call_sql('drop_topic', $name, named(if_exists => \&boolean)), !$scratch);
	},
	subscribe => sub {
		return (call_sql('subscribe', topic_name(), queue_name(),
			named(filter_tags => \&tags, binding_keys => sub { array_of(\&routing_key, 'text') },
				filter_policy => \&policy)), rand() < 0.5);
	},
	unsubscribe => sub { return (call_sql('unsubscribe', topic_name(), queue_name()), 1); },
	publish => sub {
		my $body = rand() < 0.8 ? body_text() : body_jsonb();
		return ("SELECT * FROM queue.publish(" . join(', ', topic_name(), $body,
			named(tags => \&tags, routing_key => \&routing_key, attributes => \&jsonb_obj,
				message_group_id => \&token, deduplication_id => \&token, delay => \&interval)) . ")",
			rand() < 0.5);
	},
	publish_batch => sub {
		return ("SELECT * FROM queue.publish_batch(" . join(', ', topic_name(), array_of(\&body_text, 'text'),
			named(tags => \&tags, routing_keys => sub { array_of(\&routing_key, 'text') },
				attributes => sub { array_of(\&jsonb_obj, 'jsonb') },
				message_group_ids => sub { array_of(\&token, 'text') },
				deduplication_ids => sub { array_of(\&token, 'text') })) . ")", rand() < 0.5);
	},
	grant_topic => sub { return (call_sql('grant_topic', topic_name(), role_name(), topic_privileges()), 1); },
	revoke_topic => sub { return (call_sql('revoke_topic', topic_name(), role_name(), topic_privileges()), 1); },
	topics => sub { return ("SELECT * FROM queue.topics, queue.subscriptions", 0); },
	create_consumer => sub {
		return (call_sql('create_consumer', consumer_name(), queue_name(), handler(),
			named(batch_size => \&int4, concurrency => \&int4, retry => \&retry_kind)), rand() < 0.7);
	},
	drop_consumer => sub {
		return (call_sql('drop_consumer', consumer_name(), named(if_exists => \&boolean)), rand() < 0.5);
	},
	pause_consumer => sub { return (call_sql('pause_consumer', consumer_name()), rand() < 0.5); },
	resume_consumer => sub { return (call_sql('resume_consumer', consumer_name()), rand() < 0.5); },
	consumers => sub { return ("SELECT * FROM queue.consumers", 0); },
);
# Sends and receives more often, so the queues hold messages and receipts.
my @weighted = ((sort keys %calls), qw(send send send_batch receive receive receive delete
	change_visibility));

# --- running -------------------------------------------------------------------

my $setup = <<'SQL';
\set ON_ERROR_STOP 0
SET client_min_messages = error;
SET statement_timeout = '@TIMEOUT@s';
CREATE TABLE IF NOT EXISTS fz_receipts (id bigserial PRIMARY KEY, receipt text);
GRANT ALL ON fz_receipts, fz_receipts_id_seq TO PUBLIC;
-- fz(i, sql, rollback, role): run one call in a subtransaction (as role,
-- if not null) and tell its SQLSTATE ('00000' when it worked), with the
-- message of an internal error.  A timeout (57014) is not caught: it shows
-- on stderr as a hang.
CREATE FUNCTION pg_temp.fz(i int, cmd text, rollback boolean, role text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	IF role IS NOT NULL THEN
		EXECUTE format('SET LOCAL ROLE %I', role);
	END IF;
	EXECUTE cmd;
	IF rollback THEN
		RAISE SQLSTATE 'QFZ00';
	END IF;
	RETURN i || '|00000';
EXCEPTION
	WHEN SQLSTATE 'QFZ00' THEN
		RETURN i || '|00000';
	WHEN OTHERS THEN
		IF SQLSTATE IN ('XX000', 'P0001') THEN
			RETURN i || '|' || SQLSTATE || '|' || replace(SQLERRM, E'\n', ' ');
		END IF;
		RETURN i || '|' || SQLSTATE;
END
$$;
SQL
$setup =~ s/\@TIMEOUT\@/$call_timeout/;

my (%hist, %by_fn, @bad, @sql, %example);
# The SQLSTATEs DESIGN.md's error table names, and those PostgreSQL itself
# gives for arguments that never reach us (casts, function lookup, array
# and value limits).  Others are printed as a note, not a failure.
my %expected = map { $_ => 1 } qw(00000 22004 42602 42622 42704 42710 22023 54000 22P02 55000
	42501 25006 25000 2BP01 22007 22008 22003 22021 42883 54001 42725);
my $tried = 0;
my $failed = 0;
my $t0 = time();
print "fuzz: seed $seed, $iterations calls, statement_timeout ${call_timeout}s\n";

my $tmp = "/tmp/queue-fuzz-$$";
mkdir $tmp or die "mkdir $tmp: $!\n";
END {
	local $?;    # keep the exit status
	system('rm', '-rf', $tmp) if defined $tmp && -d $tmp;
}

for (my $start = 0; $start < $iterations && !$failed; $start += $chunk) {
	my $end = $start + $chunk < $iterations ? $start + $chunk : $iterations;
	my $script = $setup;
	my $first_line = ($setup =~ tr/\n//) + 1;    # the line of call $start
	my %fn_of;
	for my $i ($start .. $end - 1) {
		my $fn = pick(@weighted);
		my ($sql, $rollback) = $calls{$fn}->();
		$sql[$i] = $sql;
		$fn_of{$i} = $fn;
		my $as = ($role ne '' && rand() < 0.2) ? lit($role) : 'NULL';
		# One line a call (the call's text travels as base64), so psql's
		# line numbers in errors name the call.
		my $b64 = encode_base64(encode_utf8($sql), '');
		$script .= "SELECT pg_temp.fz($i, convert_from(decode('$b64', 'base64'), 'UTF8'), "
			. ($rollback ? 'true' : 'false') . ", $as);\n";
	}
	open(my $fh, '>:utf8', "$tmp/in.sql") or die "$tmp/in.sql: $!\n";
	print $fh $script;
	close $fh;
	# A wall-clock bound over the whole chunk, beyond the per-call timeout.
	my $bound = $call_timeout * 4 + 120;
	my $rc = system("timeout -k 10 $bound $psql -X -q -A -t -v ON_ERROR_STOP=0 -f $tmp/in.sql >$tmp/out 2>$tmp/err");
	$rc = $rc == -1 ? 255 : $rc >> 8;

	open($fh, '<:utf8', "$tmp/out") or die "$tmp/out: $!\n";
	my %seen;
	while (my $line = <$fh>) {
		chomp $line;
		next unless $line =~ /^(\d+)\|([0-9A-Z]{5})(?:\|(.*))?$/;
		my ($i, $code, $msg) = ($1, $2, $3);
		$seen{$i} = 1;
		$tried++;
		$hist{$code}++;
		$by_fn{"$fn_of{$i} $code"}++;
		print "$i $fn_of{$i} $code: $sql[$i]\n" if $verbose;
		$example{$code} //= "$fn_of{$i}: $sql[$i]";
		if ($code eq 'XX000' || $code eq 'P0001') {
			push @bad, "call $i gave $code ($msg): $sql[$i]";
		}
	}
	close $fh;
	open($fh, '<:utf8', "$tmp/err") or die "$tmp/err: $!\n";
	my @err = <$fh>;
	close $fh;
	my $stderr = join('', @err);
	# Timeouts and lost connections, by the line psql names.
	my $lost;
	for my $line (@err) {
		next unless $line =~ /^psql:[^:]*:(\d+): (.*)$/;
		my ($n, $what) = ($1, $2);
		my $i = $start + $n - $first_line;
		next if $i < $start || $i >= $end || $seen{$i};
		if ($what =~ /canceling statement due to statement timeout/) {
			$tried++;
			$hist{'57014 (hang)'}++;
			push @bad, "call $i hung (over ${call_timeout}s): $sql[$i]";
			$seen{$i} = 1;
		}
		elsif ($what =~ /FATAL|server closed the connection|connection to server was lost/ && !defined $lost) {
			$lost = $i;
		}
	}
	my @missing = grep { !$seen{$_} } ($start .. $end - 1);
	if ($rc == 124 || $rc == 137) {
		push @bad, "psql did not finish within ${bound}s; first call without a result: "
			. (@missing ? "$missing[0]: $sql[$missing[0]]" : 'none');
		$failed = 1;
	}
	elsif ($rc != 0 || defined $lost) {
		$lost //= $missing[0];
		if (defined $lost) {
			$tried++;
			$hist{'connection lost'}++;
			push @bad, "the connection was lost at call $lost: $sql[$lost]";
		}
		push @bad, "psql exited with status $rc: " . substr($stderr, 0, 2000);
		$failed = 1;
	}
	elsif (@missing) {
		push @bad, scalar(@missing) . " call(s) gave no result, the first $missing[0]: $sql[$missing[0]]\n"
			. substr($stderr, 0, 2000);
	}
}

my $secs = time() - $t0;
print "fuzz: $tried inputs tried in ${secs}s (seed $seed)\n";
print "fuzz: SQLSTATE histogram:\n";
for my $code (sort { $hist{$b} <=> $hist{$a} || $a cmp $b } keys %hist) {
	printf "  %-16s %6d\n", $code, $hist{$code};
}
for my $code (sort grep { !$expected{$_} && $_ !~ /hang|lost/ } keys %hist) {
	my $ex = $example{$code};
	$ex = substr($ex, 0, 300) . '...' if length($ex) > 300;
	print "fuzz: note: $code is outside DESIGN.md's error table ($hist{$code} calls), e.g. $ex\n";
}
if ($verbose) {
	print "fuzz: by function:\n";
	printf "  %-40s %6d\n", $_, $by_fn{$_} for sort keys %by_fn;
}
if (@bad) {
	print "fuzz: FAILED\n";
	print "  $_\n" for @bad;
	exit 1;
}
print "fuzz: ok (no XX000, P0001, crash or hang)\n";
exit 0;
