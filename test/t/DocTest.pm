# DocTest: run the ```sql blocks of a Markdown page as written, for
# 021_readme_sql (README.md) and 033_docs_sql (docs/*.md).
#
#   my @blocks = DocTest::blocks($path);
#   my $run = DocTest::run_page($node, $path, name => 'docs/fifo.md',
#                               prefix => 'fifo', keep => ['Some section']);
#   DocTest::check_links($path, name => 'docs/fifo.md');
#
# Every ```sql block of the page is read from the page itself (never a copy,
# so the two cannot drift) and run, in order, through psql with
# ON_ERROR_STOP on the given cluster (the extension preloaded).  Each "## "
# section runs in a database of its own (blocks above the first "## " are
# the section "(top)": a page that is one walkthrough has no "## " heading
# and runs in one database).  The database is created empty when the
# section's first block runs CREATE EXTENSION queue (a walkthrough from
# scratch, as README's sections are), and with the extension created
# otherwise (a reference page assumes it).  After the section the database
# is dropped (unless named in keep, which run_page then returns by section),
# and so is every role the section created, so each section starts from a
# cluster as it was.
#
# A block must succeed, unless the page marks it, on the last non-blank
# line before its fence (visible in the page's source), with one of:
#
#   <!-- doc-test: expect-error 42501 -->   it must fail with that SQLSTATE
#   <!-- doc-test: signature -->            a synopsis, not a statement: each
#       "queue.f(arg type, ...)" in it must be a function of schema queue
#       whose input arguments have exactly those names and types, in that
#       order ("...same..." or "..." ends a list that is a prefix of them);
#       DEFAULT clauses and RETURNS are not compared
#   <!-- doc-test: skip REASON -->          not run (only where running is
#       impossible on a test cluster); counted and printed
#   <!-- doc-test: citus -->                needs a Citus cluster: not run
#       here; 037_citus runs it on one (run_citus_blocks), and
#   <!-- doc-test: citus expect-error 55000 --> there it must fail so
#
# Blocks fenced ``` without "sql" (postgresql.conf lines, shell, output) are
# not run.  run_page prints, and returns, how many blocks ran, how many were
# skipped and how many signatures were checked.
package DocTest;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use Test::More;

# The blocks of a page: { section, line, sql, kind, arg } where kind is
# run, error (arg: the SQLSTATE), signature or skip (arg: the reason).
sub blocks
{
	my ($path, $name) = @_;
	$name //= $path;
	open(my $fh, '<', $path) or BAIL_OUT("cannot read $path: $!");
	my @lines = <$fh>;
	close($fh);

	my @blocks;
	my $section = '(top)';
	my $fence;    # the fence of the block we are in, if any
	for (my $i = 0; $i < @lines; $i++)
	{
		my $line = $lines[$i];
		if ($line =~ /^(\s*)```(.*?)\s*$/ && $2 ne 'sql')
		{
			# a block not run: skip to its end, so its lines are not headings
			my $indent = $1;
			for ($i++; $i < @lines && $lines[$i] !~ /^\Q$indent\E```\s*$/; $i++) { }
			next;
		}
		if ($line =~ /^## (.*?)\s*$/)
		{
			$section = $1;
			next;
		}
		next unless $line =~ /^```sql\s*$/;

		my ($kind, $arg) = ('run', undef);
		for (my $j = $i - 1; $j >= 0; $j--)
		{
			next if $lines[$j] =~ /^\s*$/;
			if ($lines[$j] =~ /<!--\s*doc-test:\s*(.*?)\s*-->/)
			{
				my $directive = $1;
				if ($directive =~ /^expect-error\s+([0-9A-Z]{5})$/)
				{
					($kind, $arg) = ('error', $1);
				}
				elsif ($directive eq 'signature')
				{
					$kind = 'signature';
				}
				elsif ($directive =~ /^skip\s+(\S.*)$/)
				{
					($kind, $arg) = ('skip', $1);
				}
				elsif ($directive =~ /^citus(?:\s+expect-error\s+([0-9A-Z]{5}))?$/)
				{
					($kind, $arg) = ('citus', $1);
				}
				else
				{
					fail("$name line " . ($j + 1) . ": unknown doc-test directive \"$directive\"");
				}
			}
			last;
		}

		my $start = $i + 1;
		my $sql = '';
		for ($i++; $i < @lines && $lines[$i] !~ /^```\s*$/; $i++)
		{
			$sql .= $lines[$i];
		}
		BAIL_OUT("$name line $start: ```sql block never closed") if $i >= @lines;
		push @blocks,
		  { section => $section, line => $start, sql => $sql, kind => $kind, arg => $arg };
	}
	return @blocks;
}

# The signatures of a synopsis block: [ 'queue.f', [ 'arg type', ... ], partial ]
sub signatures
{
	my ($sql) = @_;
	my @sigs;
	while ($sql =~ /^\s*queue\.(\w+)\(/mg)
	{
		my ($fn, $start) = ($1, pos($sql));
		my ($depth, $quoted, $i) = (1, 0, $start);
		my @args;
		my $cur = '';
		for (; $i < length($sql); $i++)
		{
			my $c = substr($sql, $i, 1);
			if ($quoted)
			{
				$quoted = 0 if $c eq "'";
			}
			elsif ($c eq "'")
			{
				$quoted = 1;
			}
			elsif ($c eq '(')
			{
				$depth++;
			}
			elsif ($c eq ')')
			{
				last if --$depth == 0;
			}
			elsif ($c eq ',' && $depth == 1)
			{
				push @args, $cur;
				$cur = '';
				next;
			}
			$cur .= $c;
		}
		push @args, $cur if $cur =~ /\S/;
		my ($partial, @norm) = (0);
		for my $a (@args)
		{
			$a =~ s/\s+/ /g;
			$a =~ s/^ | $//g;
			if ($a =~ /^\.\.\./)
			{
				$partial = 1;
				last;
			}
			$a =~ s/ DEFAULT .*$//i;
			push @norm, $a;
		}
		push @sigs, [ $fn, \@norm, $partial ];
		pos($sql) = $i;
	}
	return @sigs;
}

sub quote
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

# Runs a page's blocks on $node; returns { ran, skipped, signatures, db => {section => dbname} }
sub run_page
{
	my ($node, $path, %opt) = @_;
	my $name = $opt{name} // $path;
	my $prefix = $opt{prefix} // 'doc';
	my %keep = map { $_ => 1 } @{ $opt{keep} // [] };
	my @blocks = blocks($path, $name);
	my %result = (ran => 0, skipped => 0, signatures => 0, citus => 0, db => {});

	my $roles_before = $node->safe_psql('postgres',
		"SELECT coalesce(max(oid::int8), 0) FROM pg_roles");
	my (@sections, %by);
	for my $b (@blocks)
	{
		push @sections, $b->{section} unless $by{ $b->{section} };
		push @{ $by{ $b->{section} } }, $b;
	}

	my $n = 0;
	for my $s (@sections)
	{
		my @sb = @{ $by{$s} };
		my $db = "${prefix}_" . ++$n;
		my $empty = $sb[0]{sql} =~ /^\s*CREATE\s+EXTENSION\s+queue\b/mi;
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, 'CREATE EXTENSION queue') unless $empty;

		for my $b (@sb)
		{
			my $what = "$name line $b->{line} ($s)";
			if ($b->{kind} eq 'skip')
			{
				note("$what skipped: $b->{arg}");
				$result{skipped}++;
				next;
			}
			if ($b->{kind} eq 'citus')
			{
				$result{citus}++;    # 037_citus runs these on a cluster
				next;
			}
			if ($b->{kind} eq 'signature')
			{
				my @sigs = signatures($b->{sql});
				ok(@sigs > 0, "$what is a synopsis of queue functions");
				for my $sig (@sigs)
				{
					my ($fn, $args, $partial) = @$sig;
					my $list = join(', ', @$args);
					my $cmp = $partial
					  ? 'left(pg_get_function_identity_arguments(p.oid), length(' . quote($list) . ')) = ' . quote($list)
					  : 'pg_get_function_identity_arguments(p.oid) = ' . quote($list);
					my $found = $node->safe_psql($db,
						"SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'queue'::regnamespace"
						  . " AND p.proname = " . quote($fn) . " AND $cmp");
					ok($found >= 1, "$what: queue.$fn($list" . ($partial ? ', ...' : '') . ") exists")
					  or diag("queue.$fn has: "
						  . $node->safe_psql($db,
							"SELECT string_agg(pg_get_function_identity_arguments(oid), E'\\n') FROM pg_proc"
							  . " WHERE pronamespace = 'queue'::regnamespace AND proname = " . quote($fn)));
				}
				$result{signatures}++;
				next;
			}
			run_block($node, $db, $b->{sql}, $what, $b->{kind} eq 'error' ? $b->{arg} : undef, '');
			$result{ran}++;
		}

		# leave the cluster as it was: the section's database and roles go
		my @roles = split /\n/, $node->safe_psql('postgres',
			"SELECT quote_ident(rolname) FROM pg_roles WHERE oid::int8 > $roles_before ORDER BY oid");
		if ($keep{$s})
		{
			$result{db}{$s} = $db;
			$node->safe_psql($db, "DROP OWNED BY $_") for @roles;
		}
		else
		{
			$node->safe_psql('postgres', "DROP DATABASE $db WITH (FORCE)");
		}
		$node->safe_psql('postgres', "DROP ROLE $_") for @roles;
	}

	my $summary = "$name: $result{ran} blocks ran, $result{skipped} skipped"
	  . ($result{signatures} ? ", $result{signatures} signature blocks checked" : '')
	  . ($result{citus} ? ", $result{citus} for a Citus cluster (037_citus)" : '');
	diag($summary);
	ok($result{skipped} <= $result{ran}, "$summary (no more skipped than ran)");
	return \%result;
}

# Run one block as written in $db: it must fail with SQLSTATE $error when
# the page says so (undef: run without an error); $where ends the check's
# name (" on the cluster").
sub run_block
{
	my ($node, $db, $sql, $what, $error, $where) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql(
		$db, $sql,
		stdout => \$out,
		stderr => \$err,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	note("$what printed:\n$out") if $out ne '';
	if (defined $error)
	{
		ok($rc == 3 && $err =~ /ERROR:\s+\Q$error\E:/,
			"$what fails with $error$where, as the page says")
		  or diag("exit $rc\n$err");
	}
	else
	{
		ok($rc == 0 && $err !~ /ERROR:/, "$what runs as written$where")
		  or diag("exit $rc\n$err");
	}
	return;
}

# The blocks a page marks "citus", run in order, as written, in database
# $db of a Citus cluster's coordinator (037_citus); returns how many ran.
sub run_citus_blocks
{
	my ($node, $path, $db, %opt) = @_;
	my $name = $opt{name} // $path;
	my $ran = 0;
	for my $b (grep { $_->{kind} eq 'citus' } blocks($path, $name))
	{
		my $what = "$name line $b->{line} ($b->{section})";
		run_block($node, $db, $b->{sql}, $what, $b->{arg}, ' on the cluster');
		$ran++;
	}
	return $ran;
}

# GitHub's anchor of a heading: lower case, punctuation but - and _ dropped,
# spaces to -.
sub anchor
{
	my ($h) = @_;
	$h = lc($h);
	$h =~ s/[^\w\- ]//g;
	$h =~ s/ /-/g;
	return $h;
}

sub anchors
{
	my ($path) = @_;
	open(my $fh, '<', $path) or return undef;
	my %a;
	my $in = 0;
	while (my $l = <$fh>)
	{
		$in = !$in if $l =~ /^\s*```/;
		$a{ anchor($1) } = 1 if !$in && $l =~ /^#+ (.*?)\s*$/;
	}
	close($fh);
	return \%a;
}

# Every relative link of the page names a file that exists, and every
# #anchor a heading of its page.
sub check_links
{
	my ($path, %opt) = @_;
	my $name = $opt{name} // $path;
	my ($dir) = $path =~ m{^(.*)/[^/]*$};
	$dir //= '.';
	open(my $fh, '<', $path) or BAIL_OUT("cannot read $path: $!");
	my $text = do { local $/; <$fh> };
	close($fh);
	$text =~ s/^```.*?^```//msg;    # links in code are not links
	my @bad;
	my $n = 0;
	while ($text =~ /\]\(([^)\s]+)\)/g)
	{
		my $link = $1;
		next if $link =~ m{^[a-z]+://};
		$n++;
		my ($file, $frag) = $link =~ /^([^#]*)(?:#(.*))?$/;
		my $target = $file eq '' ? $path : "$dir/$file";
		if (!-e $target)
		{
			push @bad, "$link (no file $target)";
			next;
		}
		next unless defined $frag && $target =~ /\.md$/;
		my $a = anchors($target);
		push @bad, "$link (no heading #$frag)" unless $a->{$frag};
	}
	ok(!@bad, "$name: its $n links resolve") or diag(join("\n", @bad));
}

1;
