/*-------------------------------------------------------------------------
 *
 * dedup.c
 *	  Deduplication ids: content-based ids, and claiming ids for a send.
 *
 * Accepted ids live in the queue's d<id> table under a unique key (scope
 * key, id) for the queue's deduplication window, counted from the first
 * accepted send and outliving the message.  Claiming is one INSERT ... ON
 * CONFLICT: the unique index makes concurrent sends of one id wait for each
 * other, so exactly one is enqueued and a rolled-back send frees its id.
 * An id whose window has passed is claimed afresh, swept or not.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "fifo/queue_fifo.h"

/*
 * The content-based deduplication id of a body: the lowercase hex SHA-256
 * of its UTF-8 bytes (the database encoding is UTF-8 or the body is ASCII;
 * a jsonb body arrives here as its text form).
 */
text *
queue_content_dedup_id(text *body)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		hex[PG_SHA256_DIGEST_LENGTH * 2 + 1];

	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) VARDATA_ANY(body),
							 VARSIZE_ANY_EXHDR(body)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA-256: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	hex_encode((const char *) digest, sizeof(digest), hex);
	hex[sizeof(hex) - 1] = '\0';
	return cstring_to_text(hex);
}

static bool
text_eq(Datum a, Datum b)
{
	text	   *ta = DatumGetTextPP(a);
	text	   *tb = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(ta) == VARSIZE_ANY_EXHDR(tb) &&
		memcmp(VARDATA_ANY(ta), VARDATA_ANY(tb), VARSIZE_ANY_EXHDR(ta)) == 0;
}

/*
 * From the last SPI result's (scope_key, deduplication_id, message_id)
 * rows, fill in the message id of each first entry of a key still without.
 */
static void
take_ids(int n, const int *first, Datum *scope_keys, Datum *dedup_ids,
		 int64 *message_ids)
{
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		k = SPI_getbinval(tup, desc, 1, &isnull);
		Datum		d = SPI_getbinval(tup, desc, 2, &isnull);
		int64		id = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));

		for (int i = 0; i < n; i++)
			if (first[i] == i && message_ids[i] == 0 &&
				text_eq(k, scope_keys[i]) && text_eq(d, dedup_ids[i]))
				message_ids[i] = id;
	}
}

/*
 * Claim the ids of n entries (all with an id).  For each entry, returns the
 * message id to use and whether it is a duplicate (then the message id is
 * the original's and nothing is to be enqueued).  An id repeated within
 * the batch is a duplicate of its first entry.
 */
void
queue_dedup_claim(QueueMeta *q, int n, Datum *scope_keys, Datum *dedup_ids,
				  TimestampTz now, int64 *message_ids, bool *duplicate)
{
	int		   *first = palloc(n * sizeof(int));
	Datum	   *ck = palloc(n * sizeof(Datum));
	Datum	   *cd = palloc(n * sizeof(Datum));
	int			nclaim = 0;
	int64	   *ids;			/* the message id drawn for each key */
	bool	   *claimed;
	Datum		args[5];
	int			rc;
	bool		missing = false;

	/* Entries repeating an earlier entry's key take its outcome. */
	for (int i = 0; i < n; i++)
	{
		first[i] = i;
		for (int j = 0; j < i; j++)
			if (text_eq(scope_keys[i], scope_keys[j]) &&
				text_eq(dedup_ids[i], dedup_ids[j]))
			{
				first[i] = first[j];
				break;
			}
		if (first[i] == i)
		{
			ck[nclaim] = scope_keys[i];
			cd[nclaim] = dedup_ids[i];
			nclaim++;
		}
		message_ids[i] = 0;
		duplicate[i] = (first[i] != i);
	}

	/*
	 * Each key's message id is drawn now, in entry order (a FIFO batch's
	 * sequence numbers follow its entries), whichever way it is claimed.
	 * Keys nobody holds are claimed directly (insert.c); the rest by the
	 * statement, which also tells an expired claim from a live one.
	 */
	{
		Oid			seq = queue_message_id_seq();
		int			k = 0;
		int			rest = 0;

		ids = palloc(Max(nclaim, 1) * sizeof(int64));
		claimed = palloc(Max(nclaim, 1) * sizeof(bool));
		for (int c = 0; c < nclaim; c++)
			ids[c] = nextval_internal(seq, false);
		queue_insert_new_dedup_ids(q, nclaim, ck, cd, ids, now, claimed);
		for (int i = 0; i < n; i++)
			if (first[i] == i)
			{
				if (claimed[k])
					message_ids[i] = ids[k];
				k++;
			}
		for (int c = 0; c < nclaim; c++)
			if (!claimed[c])
			{
				ck[rest] = ck[c];
				cd[rest] = cd[c];
				ids[rest] = ids[c];
				rest++;
			}
		nclaim = rest;
	}
	if (nclaim > 0)
	{
		args[0] = TimestampTzGetDatum(now);
		args[1] = TimestampTzGetDatum(now - q->dedup_window);
		if (nclaim == 1)
		{
			/* the usual send of one message: no arrays */
			args[2] = ck[0];
			args[3] = cd[0];
			args[4] = Int64GetDatum(ids[0]);
			rc = queue_exec(q, QP_DEDUP_CLAIM_ONE, args, NULL, false, 0);
		}
		else
		{
			args[2] = queue_text_array(nclaim, ck, NULL);
			args[3] = queue_text_array(nclaim, cd, NULL);
			args[4] = queue_int8_array(nclaim, ids);
			rc = queue_exec(q, QP_DEDUP_CLAIM, args, NULL, false, 0);
		}
		if (rc != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "deduplication claim failed: %s", SPI_result_code_string(rc));
		take_ids(n, first, scope_keys, dedup_ids, message_ids);
	}

	/* Keys not claimed are held by a live earlier send: fetch its id. */
	nclaim = 0;
	for (int i = 0; i < n; i++)
		if (first[i] == i && message_ids[i] == 0)
		{
			duplicate[i] = true;
			ck[nclaim] = scope_keys[i];
			cd[nclaim] = dedup_ids[i];
			nclaim++;
		}
	if (nclaim > 0)
	{
		args[0] = queue_text_array(nclaim, ck, NULL);
		args[1] = queue_text_array(nclaim, cd, NULL);
		rc = queue_exec(q, QP_DEDUP_ORIGINALS, args, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "deduplication lookup failed: %s", SPI_result_code_string(rc));
		take_ids(n, first, scope_keys, dedup_ids, message_ids);
	}

	for (int i = 0; i < n; i++)
	{
		if (first[i] != i)
			message_ids[i] = message_ids[first[i]];
		if (message_ids[i] == 0)
			missing = true;
	}
	if (missing)
		elog(ERROR, "deduplication id neither claimed nor found");
}
