/*-------------------------------------------------------------------------
 *
 * access_keys.c
 *	  The access keys of the SQS endpoint (DESIGN.md "SQS API", Keys): which
 *	  role a signed request runs as, and the secret that signs it.
 *
 * queue.create_access_key makes a key for a role (a superuser, or the role
 * itself), generated or as given, so clients keep their settings across a
 * restore; queue.drop_access_key drops one; the view queue.access_keys
 * shows them without their secrets; queue._access_key_secret hands the
 * endpoint's workers (superusers) a key's role and secret to verify a
 * signature with (src/sqs/sigv4.c).
 *
 * SigV4 needs the secret itself, so it is stored encrypted, never hashed:
 * under K = HMAC-SHA256(queue._secret's key, "queue access keys"), with 16
 * random bytes of nonce per key, the secret is XORed with the keystream
 * HMAC-SHA256(K, nonce || 0), HMAC-SHA256(K, nonce || 1), ... (a 4-byte
 * big-endian counter), at most 128 bytes.  queue._secret is never dumped,
 * and so neither is queue._access_keys: its rows would not decrypt in a
 * restored copy (which makes a key of its own).
 *
 * The table is the tables' owner's: each function checks its caller, then
 * works as that owner with a pinned search path (queue_enter), through
 * statements prepared once, schema-qualified.  Roles that hold keys cannot
 * be dropped (role_refs.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/sha2.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"
#include "access/queue_access.h"

PG_FUNCTION_INFO_V1(queue_create_access_key);
PG_FUNCTION_INFO_V1(queue_drop_access_key);
PG_FUNCTION_INFO_V1(queue_access_key_secret);

#define AK_ID_MAX			128 /* characters of an access key id */
#define AK_SECRET_MAX		128 /* ... and of a secret */
#define AK_NONCE_LEN		16
#define AK_GEN_ID_CHARS		16	/* after "AKIA" */
#define AK_GEN_SECRET_LEN	40
#define AK_LABEL			"queue access keys"
#define AK_TOUCH_EVERY		"60 s"	/* last_used_at is written at most this often */

/* K, derived from queue._secret; ak_generation is the secret's it came from. */
static uint8 ak_raw[PG_SHA256_DIGEST_LENGTH];
static QueueHmacKey ak_key;
static bool ak_fast = false;	/* ak_key works (hmac.c), else pg_hmac */
static uint64 ak_generation = 0;

/* The statements, prepared once per backend. */
static SPIPlanPtr plan_insert = NULL;
static SPIPlanPtr plan_get = NULL;
static SPIPlanPtr plan_delete = NULL;
static SPIPlanPtr plan_touch = NULL;

/* HMAC-SHA256 by PostgreSQL's pg_hmac: deriving K, and where hmac.c cannot. */
static void
hmac_reference(const uint8 *key, int keylen, const uint8 *msg, int len, uint8 *out)
{
	queue_hmac_reference(key, keylen, msg, len, out, "access key HMAC");
}

/* One keystream block: HMAC-SHA256(K, msg). */
static void
ak_mac(const uint8 *msg, int len, uint8 *out)
{
	if (ak_fast)
		queue_hmac(&ak_key, msg, len, out);
	else
		hmac_reference(ak_raw, sizeof(ak_raw), msg, len, out);
}

/*
 * Derive K when queue._secret was (re)read (SPI connected, as the tables'
 * owner).  hmac.c's result is checked once against pg_hmac's: the two
 * must agree, or a secret stored by one would not decrypt by the other.
 */
static void
ak_load_key(void)
{
	uint64		generation;
	const uint8 *secret = queue_secret_key(&generation);

	if (generation == ak_generation)
		return;
	hmac_reference(secret, QUEUE_SECRET_LEN, (const uint8 *) AK_LABEL,
				   strlen(AK_LABEL), ak_raw);
	ak_fast = queue_hmac_set_key(&ak_key, ak_raw, sizeof(ak_raw));
	if (ak_fast)
	{
		uint8		want[PG_SHA256_DIGEST_LENGTH];
		uint8		got[PG_SHA256_DIGEST_LENGTH];

		hmac_reference(ak_raw, sizeof(ak_raw), secret, QUEUE_SECRET_LEN, want);
		queue_hmac(&ak_key, secret, QUEUE_SECRET_LEN, got);
		ak_fast = memcmp(want, got, sizeof(want)) == 0;
		if (!ak_fast)
			elog(WARNING, "queue: hmac.c disagrees with pg_hmac; access keys use pg_hmac");
	}
	ak_generation = generation;
}

/* out = in XOR the keystream of nonce (encrypts and decrypts alike). */
static void
ak_crypt(const uint8 *nonce, const uint8 *in, int len, uint8 *out)
{
	uint8		block_in[AK_NONCE_LEN + 4];
	uint8		ks[PG_SHA256_DIGEST_LENGTH];
	uint32		counter = 0;

	Assert(len <= AK_SECRET_MAX);
	memcpy(block_in, nonce, AK_NONCE_LEN);
	for (int off = 0; off < len; off += PG_SHA256_DIGEST_LENGTH, counter++)
	{
		uint32		be = pg_hton32(counter);

		memcpy(block_in + AK_NONCE_LEN, &be, 4);
		ak_mac(block_in, sizeof(block_in), ks);
		for (int i = 0; i < PG_SHA256_DIGEST_LENGTH && off + i < len; i++)
			out[off + i] = in[off + i] ^ ks[i];
	}
	explicit_bzero(ks, sizeof(ks));
}

/* A bytea of len bytes. */
static bytea *
make_bytea(const uint8 *data, int len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return b;
}

/* len characters drawn from alphabet (whose size divides 256: unbiased). */
static void
random_chars(char *out, int len, const char *alphabet, int size)
{
	uint8		bytes[AK_GEN_SECRET_LEN];

	Assert(len <= (int) sizeof(bytes) && 256 % size == 0);
	if (!pg_strong_random(bytes, len))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random access key bytes")));
	for (int i = 0; i < len; i++)
		out[i] = alphabet[bytes[i] % size];
	out[len] = '\0';
	explicit_bzero(bytes, sizeof(bytes));
}

/* Refused in a read-only transaction and on a standby (25006). */
static void
check_writable(void)
{
	if (RecoveryInProgress() || XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot change access keys in a read-only transaction"),
				 errhint("Access keys can be changed only on the primary server.")));
}

/* The name of an existing role, or 42704. */
static char *
role_name(Oid role)
{
	char	   *name = GetUserNameFromId(role, true);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role)));
	return name;
}

/* 1..128 characters of [A-Za-z0-9_.-] (SQS's keys are like AKIA...). */
static void
check_key_id(const char *id)
{
	size_t		len = strlen(id);
	bool		ok = len >= 1 && len <= AK_ID_MAX;

	for (size_t i = 0; ok && i < len; i++)
		ok = (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= 'a' && id[i] <= 'z') ||
			(id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '.' || id[i] == '-';
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"access_key_id\" must be 1 to %d characters of A-Z, a-z, 0-9, \"_\", \".\" and \"-\"",
						AK_ID_MAX)));
}

/* 1..128 printable ASCII characters, no space; never echoed back. */
static void
check_secret(const char *secret, size_t len)
{
	bool		ok = len >= 1 && len <= AK_SECRET_MAX;

	for (size_t i = 0; ok && i < len; i++)
		ok = secret[i] > ' ' && secret[i] <= '~';
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"secret_access_key\" must be 1 to %d printable ASCII characters without spaces",
						AK_SECRET_MAX)));
}

/* Prepare the statements, as the tables' owner under the pinned search path. */
static void
prepare_plans(void)
{
	if (plan_insert == NULL)
	{
		Oid			types[4] = {TEXTOID, REGROLEOID, BYTEAOID, BYTEAOID};

		plan_insert = queue_keep_plan(
									  "INSERT INTO queue._access_keys AS k (access_key_id, role, nonce, secret, created_at)"
									  " VALUES ($1, $2, $3, $4, pg_catalog.now())"
									  " ON CONFLICT (access_key_id) DO NOTHING", 4, types);
	}
	if (plan_get == NULL)
	{
		Oid			types[1] = {TEXTOID};

		plan_get = queue_keep_plan(
								   "SELECT k.role::pg_catalog.oid, k.nonce, k.secret FROM queue._access_keys k"
								   " WHERE k.access_key_id OPERATOR(pg_catalog.=) $1", 1, types);
	}
	if (plan_delete == NULL)
	{
		Oid			types[1] = {TEXTOID};

		plan_delete = queue_keep_plan(
									  "DELETE FROM queue._access_keys k WHERE k.access_key_id OPERATOR(pg_catalog.=) $1",
									  1, types);
	}
	if (plan_touch == NULL)
	{
		Oid			types[1] = {TEXTOID};

		/* SKIP LOCKED: a request never waits for another's note of use. */
		plan_touch = queue_keep_plan(
									 "UPDATE queue._access_keys k SET last_used_at = pg_catalog.now()"
									 " FROM (SELECT u.access_key_id FROM queue._access_keys u"
									 "       WHERE u.access_key_id OPERATOR(pg_catalog.=) $1"
									 "         AND (u.last_used_at IS NULL OR u.last_used_at OPERATOR(pg_catalog.<)"
									 "              (pg_catalog.now() OPERATOR(pg_catalog.-) '" AK_TOUCH_EVERY "'::pg_catalog.interval))"
									 "       FOR UPDATE SKIP LOCKED) s"
									 " WHERE k.access_key_id OPERATOR(pg_catalog.=) s.access_key_id", 1, types);
	}
}

/*
 * A stored key: its role, and its secret decrypted (NUL ended, in the
 * caller's context from before SPI_connect).  False when there is none.
 * SPI connected, K loaded.
 */
static bool
get_key(text *id, Oid *role, char **secret, int *secret_len)
{
	Datum		values[1] = {PointerGetDatum(id)};
	bool		isnull;
	bytea	   *nonce;
	bytea	   *enc;
	int			len;
	int			rc;

	rc = SPI_execute_plan(plan_get, values, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "access key lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	*role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	nonce = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	enc = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	len = VARSIZE_ANY_EXHDR(enc);
	if (VARSIZE_ANY_EXHDR(nonce) != AK_NONCE_LEN || len > AK_SECRET_MAX)
		elog(ERROR, "access key \"%s\" is stored damaged", text_to_cstring(id));
	*secret = SPI_palloc(len + 1);
	ak_crypt((const uint8 *) VARDATA_ANY(nonce), (const uint8 *) VARDATA_ANY(enc), len,
			 (uint8 *) *secret);
	(*secret)[len] = '\0';
	*secret_len = len;
	return true;
}

/* Equal secrets, compared in time independent of where they differ. */
static bool
same_secret(const char *a, int alen, const char *b, int blen)
{
	uint8		diff = alen != blen;

	for (int i = 0; i < alen && i < blen; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

/*
 * queue.create_access_key(role, access_key_id, secret_access_key): a key
 * for role, made by a superuser or the role itself.  Without an id, both
 * are generated ("AKIA" and 16 characters of base32; 40 characters of
 * base64's alphabet, as AWS's look); with one, the secret is generated
 * unless given.  The same id for the same role and secret again returns
 * it; any other use of an existing id is 42710.
 */
Datum
queue_create_access_key(PG_FUNCTION_ARGS)
{
	static const char base32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	static const char base64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			role;
	char	   *name;
	bool		generated_id = PG_ARGISNULL(1);
	char	   *id;
	char	   *secret;
	int			secret_len;
	uint8		nonce[AK_NONCE_LEN];
	uint8		enc[AK_SECRET_MAX];
	QueueCall	call;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	bool		done = false;

	queue_arg_notnull(fcinfo, 0, "role");
	role = PG_GETARG_OID(0);
	name = role_name(role);
	if (!superuser() && GetUserId() != role)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create an access key for role \"%s\"", name),
				 errdetail("Only a superuser or the role itself creates its access keys.")));
	check_writable();

	if (!PG_ARGISNULL(2) && generated_id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"secret_access_key\" needs an access_key_id"),
				 errhint("Give both, or neither to have both generated.")));
	if (generated_id)
		id = palloc(4 + AK_GEN_ID_CHARS + 1);
	else
	{
		id = text_to_cstring(PG_GETARG_TEXT_PP(1));
		check_key_id(id);
	}
	if (PG_ARGISNULL(2))
	{
		secret = palloc(AK_GEN_SECRET_LEN + 1);
		random_chars(secret, AK_GEN_SECRET_LEN, base64, 64);
		secret_len = AK_GEN_SECRET_LEN;
	}
	else
	{
		text	   *t = PG_GETARG_TEXT_PP(2);

		secret_len = VARSIZE_ANY_EXHDR(t);
		check_secret(VARDATA_ANY(t), secret_len);
		secret = text_to_cstring(t);
	}

	InitMaterializedSRF(fcinfo, 0);
	queue_enter(&call);
	SPI_connect();
	prepare_plans();
	ak_load_key();
	if (!pg_strong_random(nonce, sizeof(nonce)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random access key nonce")));
	ak_crypt(nonce, (const uint8 *) secret, secret_len, enc);

	/*
	 * A generated id meeting an existing one (2^-80) draws again; a given id
	 * whose row went between the insert and the look draws nothing and
	 * tries again: a few times at most.
	 */
	for (int attempt = 0; attempt < 3 && !done; attempt++)
	{
		Datum		args[4];
		Oid			stored_role;
		char	   *stored;
		int			stored_len;
		int			rc;

		if (generated_id)
		{
			memcpy(id, "AKIA", 4);
			random_chars(id + 4, AK_GEN_ID_CHARS, base32, 32);
		}
		args[0] = CStringGetTextDatum(id);
		args[1] = ObjectIdGetDatum(role);
		args[2] = PointerGetDatum(make_bytea(nonce, AK_NONCE_LEN));
		args[3] = PointerGetDatum(make_bytea(enc, secret_len));
		rc = SPI_execute_plan(plan_insert, args, NULL, false, 0);
		if (rc != SPI_OK_INSERT)
			elog(ERROR, "access key insert failed: %s", SPI_result_code_string(rc));
		done = SPI_processed == 1;
		if (done || generated_id)
			continue;
		/* The id exists: the same key again, or a conflict. */
		if (!get_key((text *) DatumGetPointer(args[0]), &stored_role, &stored, &stored_len))
			continue;
		done = stored_role == role && !PG_ARGISNULL(2) &&
			same_secret(stored, stored_len, secret, secret_len);
		explicit_bzero(stored, stored_len);
		if (!done)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("access key \"%s\" already exists", id),
					 errdetail("It belongs to another role or has another secret."),
					 errhint("Drop it first with queue.drop_access_key to make it again.")));
	}
	if (!done)
		elog(ERROR, "could not store access key \"%s\"", id);
	SPI_finish();
	queue_leave(&call);
	explicit_bzero(enc, sizeof(enc));

	values[0] = CStringGetTextDatum(id);
	values[1] = CStringGetTextDatum(secret);
	explicit_bzero(secret, secret_len);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

/*
 * queue.drop_access_key(access_key_id): false when there is no such key;
 * a key of another role is refused (42501) unless the caller is a
 * superuser.
 */
Datum
queue_drop_access_key(PG_FUNCTION_ARGS)
{
	text	   *id;
	QueueCall	call;
	Datum		values[1];
	bool		found;
	int			rc;

	queue_arg_notnull(fcinfo, 0, "access_key_id");
	id = PG_GETARG_TEXT_PP(0);
	check_writable();
	values[0] = PointerGetDatum(id);

	queue_enter(&call);
	SPI_connect();
	prepare_plans();
	rc = SPI_execute_plan(plan_get, values, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "access key lookup failed: %s", SPI_result_code_string(rc));
	found = SPI_processed > 0;
	if (found)
	{
		bool		isnull;
		Oid			role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
														  SPI_tuptable->tupdesc, 1, &isnull));

		if (!superuser_arg(call.caller) && call.caller != role)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to drop access key \"%s\"", text_to_cstring(id)),
					 errdetail("Only a superuser or the key's role drops it.")));
		rc = SPI_execute_plan(plan_delete, values, NULL, false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "access key delete failed: %s", SPI_result_code_string(rc));
		found = SPI_processed > 0;	/* or a concurrent drop took it */
	}
	SPI_finish();
	queue_leave(&call);
	PG_RETURN_BOOL(found);
}

/*
 * queue._access_key_secret(access_key_id): the key's role and its secret,
 * for the endpoint's workers (superusers; not granted to PUBLIC, and
 * checked here too).  No row for an unknown key.  Notes the use in
 * last_used_at when it is unset or over a minute old, so a busy key is not
 * written by every request, and never in a read-only transaction.
 */
Datum
queue_access_key_secret(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueueCall	call;
	text	   *id;
	Oid			role;
	char	   *secret;
	int			secret_len;
	bool		found;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function _access_key_secret"),
				 errdetail("Only the SQS endpoint, as a superuser, reads access key secrets.")));
	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		return (Datum) 0;
	id = PG_GETARG_TEXT_PP(0);
	if (VARSIZE_ANY_EXHDR(id) > AK_ID_MAX)
		return (Datum) 0;		/* none is that long */

	queue_enter(&call);
	SPI_connect();
	prepare_plans();
	ak_load_key();
	found = get_key(id, &role, &secret, &secret_len);
	if (found && !XactReadOnly)
	{
		Datum		values[1] = {PointerGetDatum(id)};
		int			rc = SPI_execute_plan(plan_touch, values, NULL, false, 0);

		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "access key use note failed: %s", SPI_result_code_string(rc));
	}
	SPI_finish();
	queue_leave(&call);

	if (found)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = ObjectIdGetDatum(role);
		values[1] = PointerGetDatum(cstring_to_text_with_len(secret, secret_len));
		explicit_bzero(secret, secret_len);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
