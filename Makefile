# queue: SQS-style message queues for PostgreSQL (PGXS build)
#
#   make          build the extension
#   make install  install it into the PostgreSQL that pg_config names
#   make run      build, install, start a throwaway cluster with the demo
#                 (PORT=5499 picks its port)
#   make stop     stop that cluster
#   make test     build, install, fresh cluster, every suite
#   make bench    benchmarks (test/bench), never part of make test
#   make fuzz     the SQL-call and SQS-endpoint fuzzers (test/fuzz), FUZZ_ITERATIONS each
#   make deb      Debian packages postgresql-NN-queue, one per major with headers here (.deb/)
#   make deb-test build them, install each, run the regress suite on it, remove it
#   make test-versions  every suite on PostgreSQL 15, 17, 18 and 19 beta (16 from a source tree)
#   make conformance  LocalStack's AWS-recorded SQS suite against the endpoint (STRICT=1: every path)

EXTENSION  = queue
MODULE_big = queue
# src/queue.c and one folder per layer (src/common ... src/worker, each
# folder's queue_<folder>.h says what it owns); src/sqs/ is a library of its
# own (below), not part of OBJS.
OBJS       = $(patsubst %.c,%.o,$(wildcard src/*.c) $(filter-out src/sqs/%,$(wildcard src/*/*.c)))
DATA       = $(wildcard sql/queue--*.sql)
PG_CPPFLAGS = -I$(srcdir)/src
PG_CFLAGS   = -Wall -Wmissing-prototypes -Werror=implicit-function-declaration
# CI builds with warnings as errors (CI=true is set there).
ifeq ($(CI),true)
PG_CFLAGS  += -Werror
endif

QUEUE_TEST_OPTS = --inputdir=test --temp-config=test/queue.conf --load-extension=queue
REGRESS        = $(patsubst test/sql/%.sql,%,$(sort $(wildcard test/sql/*.sql)))
REGRESS_OPTS   = $(QUEUE_TEST_OPTS) --temp-instance=./tmp_check
ISOLATION      = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = $(QUEUE_TEST_OPTS) --temp-instance=./tmp_check_iso
TAP_TESTS   = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
# Receipts are signed by OpenSSL's SHA-256 (src/common/hmac.c) where PostgreSQL
# was built with OpenSSL, as its pg_config.h says (USE_OPENSSL), and by
# pg_hmac otherwise: only the former links libcrypto.
QUEUE_USE_OPENSSL := $(shell grep -qs 'define USE_OPENSSL 1' "$$($(PG_CONFIG) --includedir-server 2>/dev/null)/pg_config.h" && echo yes)
ifeq ($(QUEUE_USE_OPENSSL),yes)
SHLIB_LINK += -lcrypto
endif
# A fresh machine may lack PGXS: the set-up script installs it before we
# ask pg_config for it (see test/setup.sh).
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifneq ($(PGXS),)
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
endif
endif

# The SQS endpoint's library, queue_sqs (src/sqs/, its own Makefile):
# built and installed with the extension when libmicrohttpd's header is
# there, skipped with a note otherwise (the core never needs it).  Its
# sources are not in OBJS above (src/*.c only).
QUEUE_SQS := $(shell { pkg-config --exists libmicrohttpd 2>/dev/null || test -f /usr/include/microhttpd.h; } && test -f src/sqs/server.c && echo yes)
.PHONY: sqs-lib install-sqs clean-sqs
ifeq ($(QUEUE_SQS),yes)
all: sqs-lib
install: install-sqs
clean: clean-sqs
sqs-lib:
	$(MAKE) -C src/sqs PG_CONFIG=$(PG_CONFIG)
install-sqs: sqs-lib
	$(MAKE) -C src/sqs PG_CONFIG=$(PG_CONFIG) install
clean-sqs:
	$(MAKE) -C src/sqs PG_CONFIG=$(PG_CONFIG) clean
else
all: sqs-lib
sqs-lib:
	@echo "note: no libmicrohttpd header (libmicrohttpd-dev) or no src/sqs/server.c: queue_sqs, the SQS endpoint, is not built"
endif

.PHONY: run stop test bench fuzz deb deb-test test-versions conformance
run:
	bash test/setup.sh
	$(MAKE) install
	QUEUE_RUN_PORT=$(PORT) bash test/run_demo.sh

stop:
	bash test/run_demo.sh stop

# Bounded fuzz runs come first (the SQL calls, then the SQS endpoint's
# requests, about 30 s); run_tests.sh counts each as one test
# (QUEUE_FUZZ_RC, QUEUE_SQS_FUZZ_RC), so its "N passed, M failed" is the
# last line and counts every part; any failing fails the target.
test:
	bash test/setup.sh
	$(MAKE) install
	FUZZ_ITERATIONS=300 bash test/fuzz/run.sh; fuzz_rc=$$?; \
	FUZZ_ITERATIONS=250 bash test/fuzz/sqs_run.sh; sqs_fuzz_rc=$$?; \
	QUEUE_FUZZ_RC=$$fuzz_rc QUEUE_SQS_FUZZ_RC=$$sqs_fuzz_rc bash test/run_tests.sh

fuzz:
	bash test/setup.sh
	$(MAKE) install
	rc=0; bash test/fuzz/run.sh || rc=1; bash test/fuzz/sqs_run.sh || rc=1; exit $$rc

deb:
	bash test/deb.sh build

deb-test:
	bash test/deb.sh test

test-versions:
	bash test/test_versions.sh

conformance:
	bash test/conformance.sh

bench:
	bash test/setup.sh
	$(MAKE) install
	bash test/bench/run.sh

# Every object depends on the shared headers (PGXS tracks no headers), and
# on the PostgreSQL it was built for: a stamp holds pg_config's path and
# version, and changes when PG_CONFIG does, so `make test PG_CONFIG=...`
# never links objects built for another version.
PG_STAMP := .pg_config.stamp
EXTRA_CLEAN += $(PG_STAMP)
ifneq ($(PGXS),)
ifneq ($(shell cat $(PG_STAMP) 2>/dev/null),$(PG_CONFIG) $(VERSION))
$(shell echo '$(PG_CONFIG) $(VERSION)' >$(PG_STAMP))
endif
endif
$(OBJS): $(wildcard src/*.h src/*/*.h) $(PG_STAMP)
