# docs/*.md run as written.  Every ```sql block of every page of docs/ is
# read from the page itself and run, in order, by test/t/DocTest.pm (which
# says how in full): page by page, each "## " section in a fresh database
# (with the extension created, unless the section's first block creates it;
# a page without "## " sections is one walkthrough and runs in one
# database), the section's roles and database dropped after it.  Blocks
# marked on the line before their fence:
#
#   <!-- doc-test: expect-error SQLSTATE -->  must fail with that SQLSTATE
#   <!-- doc-test: signature -->              a synopsis: each function in it
#                                             must exist with those argument
#                                             names and types
#   <!-- doc-test: skip REASON -->            not run (impossible on a test
#                                             cluster); kept rare: a page
#                                             fails when it skips more
#                                             blocks than it runs
#
# Blocks fenced ``` without "sql" are not run.  For each page the test
# prints how many blocks ran, how many were skipped and how many synopses
# were checked, and that every link of the page (and of docs/README.md,
# the index) names a file and heading that exist.  README.md's own blocks
# are 021_readme_sql's.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use QueueWorkerNode;
use DocTest;

my $docs = "$FindBin::RealBin/../../docs";
opendir(my $dh, $docs) or BAIL_OUT("cannot read $docs: $!");
my @pages = sort grep { /\.md$/ } readdir($dh);
closedir($dh);
ok(scalar(@pages) > 1, scalar(@pages) . ' pages in docs/');

DocTest::check_links("$docs/$_", name => "docs/$_") for @pages;

# No two places of docs/ and README.md create the same role (a reader who
# follows two pages would meet "role ... already exists", or one role
# standing for two purposes).
my %made;
for my $file ((map { "$docs/$_" } @pages), "$docs/../README.md")
{
	my $text = PostgreSQL::Test::Utils::slurp_file($file);
	push @{ $made{ lc $1 } }, ($file =~ m{([^/]+)$})[0] while $text =~ /CREATE ROLE\s+(\w+)/gi;
}
is(join('; ', map { "$_: @{$made{$_}}" } grep { @{ $made{$_} } > 1 } sort keys %made), '',
	'no role is created in two places of the docs');

my $node = QueueWorkerNode::start('docs');
my ($ran, $skipped, $sigs) = (0, 0, 0);
for my $page (@pages)
{
	(my $prefix = $page) =~ s/\.md$//;
	$prefix =~ s/\W/_/g;
	my $r = DocTest::run_page($node, "$docs/$page", name => "docs/$page", prefix => lc($prefix));
	$ran += $r->{ran};
	$skipped += $r->{skipped};
	$sigs += $r->{signatures};
}
diag("docs/: $ran blocks ran, $skipped skipped, $sigs signature blocks checked");

$node->stop;
done_testing();
