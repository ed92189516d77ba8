/*-------------------------------------------------------------------------
 *
 * hmac.c
 *	  HMAC-SHA-256 under one key that stays the same for a long time (the
 *	  receipt secret), with the key's work done once, by OpenSSL.
 *
 * Every receipt is signed when a message is received and checked when it
 * is deleted or its visibility changed.  PostgreSQL's pg_hmac sets up a
 * context and hashes the key's two padded blocks on every call: about
 * 19,000 instructions a receipt (callgrind), some 17 % of a standard cycle
 * of 10 messages (send, receive, delete_batch).  HMAC's inner and outer
 * hashes each begin with a block that depends on the key alone (RFC 2104),
 * so queue_hmac_set_key has OpenSSL absorb the key's ipad and opad blocks
 * into two SHA-256 digest contexts once, and queue_hmac copies them
 * (EVP_MD_CTX_copy_ex) into a third, kept context for each message: about
 * 5,800 instructions a receipt.  No hashing is written here: SHA-256 is
 * OpenSSL's.
 *
 * Where PostgreSQL is built without OpenSSL (no USE_OPENSSL), there are no
 * kept contexts: queue_hmac_set_key says so and receipt.c signs with
 * pg_hmac, PostgreSQL's own HMAC, instead.  receipt.c also compares this
 * file's result with pg_hmac's once per key before using it.
 *
 * The contexts are OpenSSL's (malloc'd, not palloc'd): made once per key,
 * freed when the next key replaces them, and never made per message, so an
 * error in the middle of a message leaks nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hmac.h"
#include "common/sha2.h"

#ifdef USE_OPENSSL
#include <openssl/err.h>
#include <openssl/evp.h>
#endif

#include "common/queue_common.h"

#ifdef USE_OPENSSL

/* Free a key's contexts, if any (a zeroed QueueHmacKey has none). */
static void
hmac_free(QueueHmacKey *k)
{
	if (k->inner != NULL)
		EVP_MD_CTX_destroy((EVP_MD_CTX *) k->inner);
	if (k->outer != NULL)
		EVP_MD_CTX_destroy((EVP_MD_CTX *) k->outer);
	if (k->work != NULL)
		EVP_MD_CTX_destroy((EVP_MD_CTX *) k->work);
	k->inner = k->outer = k->work = NULL;
}

/* A new SHA-256 context that has absorbed one block; NULL if OpenSSL fails. */
static EVP_MD_CTX *
hmac_pad_context(const EVP_MD *md, const uint8 *block)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_create();

	if (ctx == NULL)
		return NULL;
	if (EVP_DigestInit_ex(ctx, md, NULL) != 1 ||
		EVP_DigestUpdate(ctx, block, PG_SHA256_BLOCK_LENGTH) != 1)
	{
		EVP_MD_CTX_destroy(ctx);
		return NULL;
	}
	return ctx;
}
#endif							/* USE_OPENSSL */

/*
 * Set k up for key, replacing whatever key k held (k starts zeroed).  False
 * when there are no kept contexts for it: PostgreSQL without OpenSSL, or
 * OpenSSL refusing (out of memory, SHA-256 not allowed); the caller then
 * signs with pg_hmac, which says why if it cannot either.
 */
bool
queue_hmac_set_key(QueueHmacKey *k, const uint8 *key, int keylen)
{
#ifdef USE_OPENSSL
	const EVP_MD *md = EVP_sha256();
	uint8		hashed[PG_SHA256_DIGEST_LENGTH];
	uint8		ipad[PG_SHA256_BLOCK_LENGTH];
	uint8		opad[PG_SHA256_BLOCK_LENGTH];
	bool		ok;

	hmac_free(k);
	/* RFC 2104: a key longer than a block is replaced by its hash. */
	if (keylen > PG_SHA256_BLOCK_LENGTH)
	{
		if (EVP_Digest(key, keylen, hashed, NULL, md, NULL) != 1)
			return false;
		key = hashed;
		keylen = PG_SHA256_DIGEST_LENGTH;
	}
	memset(ipad, 0x36, sizeof(ipad));
	memset(opad, 0x5c, sizeof(opad));
	for (int i = 0; i < keylen; i++)
	{
		ipad[i] ^= key[i];
		opad[i] ^= key[i];
	}
	k->inner = hmac_pad_context(md, ipad);
	k->outer = hmac_pad_context(md, opad);
	k->work = EVP_MD_CTX_create();
	ok = k->inner != NULL && k->outer != NULL && k->work != NULL;
	explicit_bzero(hashed, sizeof(hashed));
	explicit_bzero(ipad, sizeof(ipad));
	explicit_bzero(opad, sizeof(opad));
	if (!ok)
		hmac_free(k);
	return ok;
#else
	return false;
#endif
}

/*
 * HMAC-SHA-256 of msg under the key k was set up with (queue_hmac_set_key
 * returned true); out holds 32 bytes.
 */
void
queue_hmac(const QueueHmacKey *k, const uint8 *msg, int len, uint8 *out)
{
#ifdef USE_OPENSSL
	EVP_MD_CTX *work = (EVP_MD_CTX *) k->work;
	uint8		inner[PG_SHA256_DIGEST_LENGTH];
	unsigned int n;

	if (work == NULL)
		elog(ERROR, "receipt HMAC used without a key");
	if (EVP_MD_CTX_copy_ex(work, (const EVP_MD_CTX *) k->inner) != 1 ||
		EVP_DigestUpdate(work, msg, len) != 1 ||
		EVP_DigestFinal_ex(work, inner, &n) != 1 ||
		n != sizeof(inner) ||
		EVP_MD_CTX_copy_ex(work, (const EVP_MD_CTX *) k->outer) != 1 ||
		EVP_DigestUpdate(work, inner, sizeof(inner)) != 1 ||
		EVP_DigestFinal_ex(work, out, &n) != 1 ||
		n != PG_SHA256_DIGEST_LENGTH)
	{
		const char *reason = ERR_reason_error_string(ERR_get_error());

		ERR_clear_error();
		elog(ERROR, "could not compute receipt HMAC: %s",
			 reason ? reason : "no OpenSSL error");
	}
#else
	elog(ERROR, "receipt HMAC used without a key");
#endif
}

/*
 * HMAC-SHA-256 by PostgreSQL's pg_hmac: the reference the fast path above
 * is checked against (receipt.c, access_keys.c), and the fallback where
 * it disagrees.  what names the caller's use in the error.
 */
void
queue_hmac_reference(const uint8 *key, int keylen, const uint8 *msg, int len,
					 uint8 *out, const char *what)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);

	if (ctx == NULL ||
		pg_hmac_init(ctx, key, keylen) < 0 ||
		pg_hmac_update(ctx, msg, len) < 0 ||
		pg_hmac_final(ctx, out, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute %s: %s", what, pg_hmac_error(ctx));
	pg_hmac_free(ctx);
}
