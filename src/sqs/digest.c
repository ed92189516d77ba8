/*-------------------------------------------------------------------------
 *
 * digest.c
 *	  SQS's MD5 digests (REFERENCE.md 1.7): MD5OfMessageBody, the hex MD5 of
 *	  the body's bytes, and MD5OfMessageAttributes, an MD5 over the message
 *	  attributes in a fixed binary encoding.  The SDKs recompute both and
 *	  refuse an answer whose digest differs, so these must be exact.
 *
 * The attribute encoding: the attributes sorted by name (byte order), each
 * as a 4-byte big-endian length and the name, the same for the DataType, a
 * transport byte (1 for String and Number and their custom labels, 2 for
 * Binary), then a length and the value (a Binary value's decoded bytes).
 *
 * Calls only PostgreSQL (pg_md5_hash, pg_b64_decode).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/base64.h"
#include "common/md5.h"

#include "common/compat.h"
#include "sqs.h"

/* One attribute, as the encoding needs it. */
typedef struct DigestAttr
{
	char	   *name;
	char	   *type;
	bool		binary;
	char	   *value;
	int			value_len;
} DigestAttr;

/*
 * The hex MD5 of data.  MD5 is no security measure here, only SQS's
 * integrity check; a build where MD5 is unavailable (FIPS) cannot speak SQS.
 */
void
sqs_md5_hex(const char *data, size_t len, char *hex)
{
	const char *errstr = NULL;

	if (!pg_md5_hash(data, len, hex, &errstr))
		elog(ERROR, "could not compute an MD5 digest: %s",
			 errstr ? errstr : "unknown error");
}

/* A scalar jsonb value as a C string (NULL unless a string). */
static char *
string_of(JsonbValue *v)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static int
attr_cmp(const void *a, const void *b)
{
	return strcmp(((const DigestAttr *) a)->name, ((const DigestAttr *) b)->name);
}

/* A 4-byte big-endian length, then the bytes. */
static void
append_field(StringInfo buf, const char *data, int len)
{
	unsigned char n[4];

	n[0] = (unsigned char) ((len >> 24) & 0xFF);
	n[1] = (unsigned char) ((len >> 16) & 0xFF);
	n[2] = (unsigned char) ((len >> 8) & 0xFF);
	n[3] = (unsigned char) (len & 0xFF);
	appendBinaryStringInfo(buf, (const char *) n, 4);
	appendBinaryStringInfo(buf, data, len);
}

/*
 * MD5OfMessageAttributes of attrs, an object of SQS attribute values
 * ({"DataType": ..., "StringValue" | "BinaryValue": ...}, BinaryValue as
 * base64 text).  Entries that are not such objects are skipped (the caller
 * hands over only what it answers).  False when there is nothing to digest.
 */
bool
sqs_md5_of_attributes(Jsonb *attrs, char *hex)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	DigestAttr *list;
	int			n = 0;
	int			cap;
	char	   *key = NULL;
	StringInfoData buf;

	if (attrs == NULL || !JB_ROOT_IS_OBJECT(attrs) || JB_ROOT_COUNT(attrs) == 0)
		return false;
	cap = JB_ROOT_COUNT(attrs);
	list = palloc0(cap * sizeof(DigestAttr));

	it = JsonbIteratorInit(&attrs->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && key != NULL && n < cap)
		{
			JsonbContainer *c;
			char	   *type;
			char	   *sval;
			char	   *bval;

			if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
				continue;
			c = v.val.binary.data;
			type = string_of(getKeyJsonValueFromContainer(c, "DataType", 8, NULL));
			if (type == NULL)
				continue;
			list[n].name = key;
			list[n].type = type;
			if (strncmp(type, "Binary", 6) == 0)
			{
				int			dlen;

				bval = string_of(getKeyJsonValueFromContainer(c, "BinaryValue", 11, NULL));
				if (bval == NULL)
					bval = "";
				list[n].binary = true;
				list[n].value = palloc(pg_b64_dec_len(strlen(bval)) + 1);
				dlen = pg_b64_decode(bval, strlen(bval), (void *) list[n].value,
									 pg_b64_dec_len(strlen(bval)) + 1);
				list[n].value_len = dlen < 0 ? 0 : dlen;
			}
			else
			{
				sval = string_of(getKeyJsonValueFromContainer(c, "StringValue", 11, NULL));
				if (sval == NULL)
					sval = "";
				list[n].binary = false;
				list[n].value = sval;
				list[n].value_len = strlen(sval);
			}
			n++;
		}
	}
	if (n == 0)
		return false;

	qsort(list, n, sizeof(DigestAttr), attr_cmp);
	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		char		transport = list[i].binary ? 2 : 1;

		append_field(&buf, list[i].name, strlen(list[i].name));
		append_field(&buf, list[i].type, strlen(list[i].type));
		appendBinaryStringInfo(&buf, &transport, 1);
		append_field(&buf, list[i].value, list[i].value_len);
	}
	sqs_md5_hex(buf.data, buf.len, hex);
	pfree(buf.data);
	return true;
}
