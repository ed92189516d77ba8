/*-------------------------------------------------------------------------
 *
 * receipt.c
 *	  Receipts: what a receive hands out and delete / change_visibility take.
 *
 * A receipt is 33 bytes in base64 (44 characters): a version byte, the
 * queue id, the message id, the receive's nonce, and the first 8 bytes of
 * an HMAC-SHA256 of those under the database's secret (queue._secret).
 * The message row keeps the nonce of its latest receive, so:
 *   - a receipt that does not decode, or whose MAC is wrong, or that names
 *     another queue, is forged: 22P02;
 *   - a genuine receipt whose nonce is not the row's is stale: 55000;
 *   - a genuine receipt of a row that is gone is a deleted message.
 * The MAC makes the first distinction trustworthy without any lookup.
 *
 * Nonces only need to differ between two receives of one message, so a
 * backend draws one strong random base and counts up from it: one nonce per
 * receive call, shared by the messages it returns (the message id is part
 * of the receipt).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/base64.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "port/pg_bswap.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#include "common/queue_common.h"

#define RECEIPT_VERSION		1
#define RECEIPT_BODY_LEN	(1 + 8 + 8 + 8)
#define RECEIPT_MAC_LEN		8
#define RECEIPT_BIN_LEN		(RECEIPT_BODY_LEN + RECEIPT_MAC_LEN)
#define RECEIPT_TEXT_LEN	44	/* base64 of 33 bytes, no padding */
#define SECRET_LEN			QUEUE_SECRET_LEN

static uint8 secret[SECRET_LEN];
static bool secret_loaded = false;
static uint64 secret_generation = 0;	/* counts loads: a user sees a new key */
static Oid	secret_relid = InvalidOid;
static bool nonce_ready = false;
static uint64 nonce_next;

/*
 * The secret is read once per backend.  It only changes when the extension
 * is dropped and created again, which drops and creates queue._secret: an
 * invalidation of that table (or of everything) makes us read it again.
 */
static void
secret_inval_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == secret_relid)
		secret_loaded = false;
}

static void
load_secret(void)
{
	static bool callback_registered = false;
	bytea	   *key;
	bool		isnull;
	int			rc;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(secret_inval_callback, (Datum) 0);
		callback_registered = true;
	}
	rc = SPI_execute("SELECT key, 'queue._secret'::regclass::oid FROM queue._secret", true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "queue._secret must hold exactly one key");
	key = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull || VARSIZE_ANY_EXHDR(key) != SECRET_LEN)
		elog(ERROR, "queue._secret holds a key of the wrong size");
	memcpy(secret, VARDATA_ANY(key), SECRET_LEN);
	secret_relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 2, &isnull));
	secret_loaded = true;
	secret_generation++;
}

/*
 * The database's secret (QUEUE_SECRET_LEN bytes) for another user of it
 * (access_keys.c), loaded if need be: SPI connected, as the tables' owner.
 * *generation changes whenever the key was read again, so a user that
 * derives something from it knows when to derive again.
 */
const uint8 *
queue_secret_key(uint64 *generation)
{
	if (!secret_loaded)
		load_secret();
	*generation = secret_generation;
	return secret;
}

/* HMAC-SHA-256 of a receipt's body by pg_hmac: the reference. */
static void
receipt_mac_reference(const uint8 *body, uint8 *full)
{
	queue_hmac_reference(secret, SECRET_LEN, body, RECEIPT_BODY_LEN, full, "receipt MAC");
}

/*
 * A receipt's MAC: the first bytes of HMAC-SHA-256 of its body under the
 * secret, by hmac.c with the key's blocks kept.  Each key loaded is
 * checked once against pg_hmac on a body of its own bytes; should they
 * ever disagree, pg_hmac signs instead (and a warning says so).
 */
static void
receipt_mac(const uint8 *body, uint8 *mac)
{
	static QueueHmacKey key;
	static bool key_checked = false;
	static bool key_fast = false;
	static uint64 key_generation = 0;
	uint8		full[PG_SHA256_DIGEST_LENGTH];

	if (!secret_loaded)
		load_secret();
	if (key_generation != secret_generation)
	{
		/* a key read by this function or by queue_secret_key's caller */
		key_checked = false;
		key_generation = secret_generation;
	}
	if (!key_checked)
	{
		uint8		probe[RECEIPT_BODY_LEN];
		uint8		want[PG_SHA256_DIGEST_LENGTH];

		key_fast = queue_hmac_set_key(&key, secret, SECRET_LEN);
		if (key_fast)
		{
			memcpy(probe, secret, RECEIPT_BODY_LEN);
			receipt_mac_reference(probe, want);
			queue_hmac(&key, probe, RECEIPT_BODY_LEN, full);
			key_fast = memcmp(want, full, sizeof(full)) == 0;
			if (!key_fast)
				elog(WARNING, "queue: hmac.c disagrees with pg_hmac; receipts are signed by pg_hmac");
		}
		key_checked = true;
	}
	if (key_fast)
		queue_hmac(&key, body, RECEIPT_BODY_LEN, full);
	else
		receipt_mac_reference(body, full);
	memcpy(mac, full, RECEIPT_MAC_LEN);
}

static void
put64(uint8 *p, uint64 v)
{
	v = pg_hton64(v);
	memcpy(p, &v, 8);
}

static uint64
get64(const uint8 *p)
{
	uint64		v;

	memcpy(&v, p, 8);
	return pg_ntoh64(v);
}

/* A fresh nonce for one receive call. */
uint64
queue_receipt_nonce(void)
{
	if (!nonce_ready)
	{
		if (!pg_strong_random(&nonce_next, sizeof(nonce_next)))
			elog(ERROR, "could not generate a random receipt nonce");
		nonce_ready = true;
	}
	return nonce_next++;
}

/* The receipt of one message of one receive. */
text *
queue_receipt_make(int64 queue_id, int64 message_id, uint64 nonce)
{
	uint8		bin[RECEIPT_BIN_LEN];
	text	   *out = palloc(VARHDRSZ + RECEIPT_TEXT_LEN + 1);
	int			len;

	bin[0] = RECEIPT_VERSION;
	put64(bin + 1, (uint64) queue_id);
	put64(bin + 9, (uint64) message_id);
	put64(bin + 17, nonce);
	receipt_mac(bin, bin + RECEIPT_BODY_LEN);

	len = pg_b64_encode((const QueueB64Byte *) bin, RECEIPT_BIN_LEN,
						VARDATA(out), RECEIPT_TEXT_LEN + 1);
	if (len != RECEIPT_TEXT_LEN)
		elog(ERROR, "receipt encoding failed");
	SET_VARSIZE(out, VARHDRSZ + len);
	return out;
}

pg_noreturn static void
forged(const char *argname, int ordinal, const char *why)
{
	if (ordinal > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("argument \"%s\" entry %d is not a valid receipt", argname, ordinal),
				 errdetail("%s", why)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("argument \"%s\" is not a valid receipt", argname),
			 errdetail("%s", why)));
}

/*
 * Whether queue_id came to this node from another one of a Citus cluster
 * (queue.citus_move_shard, docs/citus.md), where it was queue
 * from_queue_id: a receipt of from_queue_id, signed by that node's secret,
 * was issued before the move.  Asked only of a receipt whose signature
 * does not match; false where no queue ever moved in (before 1.9, or
 * without Citus).  The caller is connected to SPI.
 */
static bool
moved_here(int64 queue_id, int64 from_queue_id)
{
	static SPIPlanPtr plan = NULL;
	Datum		args[2];
	Oid			ns = get_namespace_oid("queue", true);

	if (!OidIsValid(ns) || !OidIsValid(get_relname_relid("_citus_moved_in", ns)))
		return false;
	if (plan == NULL)
	{
		Oid			types[2] = {INT8OID, INT8OID};

		plan = queue_keep_plan("SELECT FROM queue._citus_moved_in m "
							   "WHERE m.queue_id OPERATOR(pg_catalog.=) $1 "
							   "AND m.from_queue_id OPERATOR(pg_catalog.=) $2",
							   2, types);
	}
	args[0] = Int64GetDatum(queue_id);
	args[1] = Int64GetDatum(from_queue_id);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "moved-queue lookup failed");
	return SPI_processed > 0;
}

/* A receipt issued on the node a queue was moved from: stale, 55000. */
pg_noreturn static void
stale_moved(const char *argname, int ordinal)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 ordinal > 0 ?
			 errmsg("argument \"%s\" entry %d is a stale receipt", argname, ordinal) :
			 errmsg("argument \"%s\" is a stale receipt", argname),
			 errdetail("It was issued before the queue moved to this node of the Citus cluster."),
			 errhint("Receive the message again: it is visible again when its lease ends.")));
}

/*
 * Check a receipt given for queue_id and return the message id and nonce it
 * carries; 22P02 for anything not issued by a receive of this queue, naming
 * the argument and, in a batch, the entry (1-based, as the batch calls'
 * ordinal; 0 for a single receipt).
 */
void
queue_receipt_parse(text *receipt, int64 queue_id, const char *argname, int ordinal,
					int64 *message_id, uint64 *nonce)
{
	uint8		bin[RECEIPT_BIN_LEN + 3];
	uint8		mac[RECEIPT_MAC_LEN];
	int			len = VARSIZE_ANY_EXHDR(receipt);
	uint8		diff = 0;

	if (len != RECEIPT_TEXT_LEN)
		forged(argname, ordinal, "A receipt is 44 characters long.");
	if (pg_b64_decode(VARDATA_ANY(receipt), len, (QueueB64Byte *) bin, sizeof(bin)) != RECEIPT_BIN_LEN ||
		bin[0] != RECEIPT_VERSION)
		forged(argname, ordinal, "It does not decode.");
	receipt_mac(bin, mac);
	for (int i = 0; i < RECEIPT_MAC_LEN; i++)
		diff |= mac[i] ^ bin[RECEIPT_BODY_LEN + i];
	if (diff != 0)
	{
		if (moved_here(queue_id, (int64) get64(bin + 1)))
			stale_moved(argname, ordinal);
		forged(argname, ordinal, "Its signature does not match.");
	}
	if ((int64) get64(bin + 1) != queue_id)
		forged(argname, ordinal, "It was issued by another queue.");
	*message_id = (int64) get64(bin + 9);
	*nonce = get64(bin + 17);
}
