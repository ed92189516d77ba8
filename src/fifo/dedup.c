/*-------------------------------------------------------------------------
 *
 * dedup.c
 *	  Content-based deduplication ids: what a FIFO queue with
 *	  content_based_deduplication (and the SQS endpoint) derives from a
 *	  body.  The claims of ids a send makes are written with its messages
 *	  (storage/insert.c, queue_dedup_claim).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
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
