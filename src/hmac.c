/*-------------------------------------------------------------------------
 *
 * hmac.c
 *	  HMAC-SHA-256 under one key that stays the same for a long time (the
 *	  receipt secret), with the key's work done once.
 *
 * Every receipt is signed when a message is received and checked when it
 * is deleted or its visibility changed.  PostgreSQL's pg_hmac (OpenSSL in
 * Debian's builds) sets up a context and hashes the key's two padded
 * blocks on every call: about 13,000 instructions for a 25-byte receipt,
 * some 7 % of a FIFO cycle of 10 messages and more of a standard one
 * (callgrind).  HMAC's inner and outer hashes each begin with a block that
 * depends on the key alone, so their states after that block are kept
 * (queue_hmac_set_key), and a message of up to 55 bytes then costs two
 * SHA-256 compressions.
 *
 * SHA-256 is FIPS 180-4's; its constants are computed here, as that
 * standard defines them (the fractional parts of the square and cube roots
 * of the first primes), with exact integer roots.  receipt.c compares the
 * result with pg_hmac's once per key before using it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/sha2.h"

#include "queue.h"

static uint32 sha_k[64];		/* round constants */
static uint32 sha_h0[8];		/* initial hash value */
static bool sha_ready = false;

#ifdef HAVE_INT128
/* floor(x ^ (1/root)) for root 2 or 3, exactly. */
static uint64
int_root(uint128 x, int root)
{
	uint64		r = (uint64) (root == 2 ? sqrtl((long double) x) : cbrtl((long double) x));

#define POW(v) (root == 2 ? (uint128) (v) * (v) : \
				(uint128) (v) * (v) * (v))
	while (r > 0 && POW(r) > x)
		r--;
	while (POW(r + 1) <= x)
		r++;
#undef POW
	return r;
}

/* The first 32 bits of the fractional parts of the primes' roots. */
static bool
sha_constants(void)
{
	int			n = 0;

	for (uint32 p = 2; n < 64; p++)
	{
		bool		prime = true;

		for (uint32 d = 2; d * d <= p; d++)
			if (p % d == 0)
				prime = false;
		if (!prime)
			continue;
		sha_k[n] = (uint32) int_root((uint128) p << 96, 3);
		if (n < 8)
			sha_h0[n] = (uint32) int_root((uint128) p << 64, 2);
		n++;
	}
	return true;
}
#else
/* Without a 128-bit integer the roots are not exact here: not used. */
static bool
sha_constants(void)
{
	return false;
}
#endif

#define ROTR(x, n)	(((x) >> (n)) | ((x) << (32 - (n))))

/* One SHA-256 compression of a 64-byte block into state. */
static void
sha_block(uint32 *state, const uint8 *block)
{
	uint32		w[64];
	uint32		a = state[0],
				b = state[1],
				c = state[2],
				d = state[3],
				e = state[4],
				f = state[5],
				g = state[6],
				h = state[7];

	for (int t = 0; t < 16; t++)
		w[t] = ((uint32) block[4 * t] << 24) | ((uint32) block[4 * t + 1] << 16) |
			((uint32) block[4 * t + 2] << 8) | block[4 * t + 3];
	for (int t = 16; t < 64; t++)
	{
		uint32		s0 = ROTR(w[t - 15], 7) ^ ROTR(w[t - 15], 18) ^ (w[t - 15] >> 3);
		uint32		s1 = ROTR(w[t - 2], 17) ^ ROTR(w[t - 2], 19) ^ (w[t - 2] >> 10);

		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	for (int t = 0; t < 64; t++)
	{
		uint32		t1 = h + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) +
			((e & f) ^ (~e & g)) + sha_k[t] + w[t];
		uint32		t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) +
			((a & b) ^ (a & c) ^ (b & c));

		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	state[0] += a;
	state[1] += b;
	state[2] += c;
	state[3] += d;
	state[4] += e;
	state[5] += f;
	state[6] += g;
	state[7] += h;
}

/*
 * The last block of a message whose first "before" bytes were whole
 * blocks already compressed into state: data (len bytes, at most 55),
 * the 0x80 marker, zeros and the length in bits.  The digest goes to out.
 */
static void
sha_finish(const uint32 *state, uint64 before, const uint8 *data, int len,
		   uint8 *out)
{
	uint32		s[8];
	uint8		block[PG_SHA256_BLOCK_LENGTH];
	uint64		bits = (before + len) * 8;

	Assert(len <= PG_SHA256_BLOCK_LENGTH - 9);
	memcpy(s, state, sizeof(s));
	memset(block, 0, sizeof(block));
	memcpy(block, data, len);
	block[len] = 0x80;
	for (int i = 0; i < 8; i++)
		block[PG_SHA256_BLOCK_LENGTH - 1 - i] = (uint8) (bits >> (8 * i));
	sha_block(s, block);
	for (int i = 0; i < 8; i++)
	{
		out[4 * i] = (uint8) (s[i] >> 24);
		out[4 * i + 1] = (uint8) (s[i] >> 16);
		out[4 * i + 2] = (uint8) (s[i] >> 8);
		out[4 * i + 3] = (uint8) s[i];
	}
}

/*
 * HMAC's key blocks, compressed (keys up to the block size); false where
 * this file cannot compute (no 128-bit integer type): use pg_hmac then.
 */
bool
queue_hmac_set_key(QueueHmacKey *k, const uint8 *key, int keylen)
{
	uint8		ipad[PG_SHA256_BLOCK_LENGTH];
	uint8		opad[PG_SHA256_BLOCK_LENGTH];

	Assert(keylen <= PG_SHA256_BLOCK_LENGTH);
	if (!sha_ready)
	{
		if (!sha_constants())
			return false;
		sha_ready = true;
	}
	memset(ipad, 0x36, sizeof(ipad));
	memset(opad, 0x5c, sizeof(opad));
	for (int i = 0; i < keylen; i++)
	{
		ipad[i] ^= key[i];
		opad[i] ^= key[i];
	}
	memcpy(k->inner, sha_h0, sizeof(sha_h0));
	memcpy(k->outer, sha_h0, sizeof(sha_h0));
	sha_block(k->inner, ipad);
	sha_block(k->outer, opad);
	return true;
}

/* HMAC-SHA-256 of a message of up to 55 bytes; out holds 32. */
void
queue_hmac(const QueueHmacKey *k, const uint8 *msg, int len, uint8 *out)
{
	uint8		inner[PG_SHA256_DIGEST_LENGTH];

	sha_finish(k->inner, PG_SHA256_BLOCK_LENGTH, msg, len, inner);
	sha_finish(k->outer, PG_SHA256_BLOCK_LENGTH, inner, sizeof(inner), out);
}
