/*-------------------------------------------------------------------------
 *
 * sigv4.c
 *	  AWS Signature Version 4 for the SQS endpoint: who sent a request.
 *
 * Two forms (REFERENCE.md 1.7): the Authorization header
 * ("AWS4-HMAC-SHA256 Credential=<key>/<yyyymmdd>/<region>/sqs/aws4_request,
 * SignedHeaders=a;b, Signature=<hex>", dated by X-Amz-Date or else Date)
 * and the presigned query (X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date,
 * X-Amz-SignedHeaders, X-Amz-Signature, optional X-Amz-Expires).  The
 * canonical request is rebuilt as AWS defines it for services other than
 * S3, which is what botocore and the JS SDK's @smithy/signature-v4 sign:
 *
 *	  method
 *	  the path as received, dot segments and empty segments removed, then
 *		  every byte but the unreserved ones and '/' percent-encoded (so an
 *		  already encoded "%20" is signed as "%2520": both SDKs encode twice)
 *	  the query: each key and value percent-decoded and re-encoded with the
 *		  unreserved set, sorted by key then value, X-Amz-Signature left out
 *	  each signed header "name:value" (values trimmed, runs of blanks made
 *		  one space, repeats joined by ','), sorted, then an empty line
 *	  the signed headers' names joined by ';'
 *	  hex SHA-256 of the body, or the signed x-amz-content-sha256's value
 *		  (checked against the body unless it is UNSIGNED-PAYLOAD, which only
 *		  a presigned request without a body may use, as AWS's presigned
 *		  URLs do)
 *
 * A presigned request authorises only what it signed: no body under
 * UNSIGNED-PAYLOAD, and an X-Amz-Target header (which names the action)
 * only among its signed headers.  A verified key works only while its role
 * may log in (LOGIN, VALID UNTIL not past), as psql would.
 *
 * The string to sign and the key derivation (HMAC-SHA-256 chain "AWS4" +
 * secret -> date -> region -> "sqs" -> "aws4_request") are AWS's; the
 * signatures are compared in constant time.  Every input is bounded before
 * it is looped over.  The secret comes from the core's
 * queue._access_key_secret through one kept plan and is wiped after use.
 *
 * Time: |now - X-Amz-Date| <= SQS_MAX_SKEW_SECS; a presigned request with
 * X-Amz-Expires is good from X-Amz-Date - skew to X-Amz-Date + expires.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/datetime.h"

#include "common/compat.h"
#include "core_api.h"
#include "sqs.h"

#define SIGV4_ALGORITHM			"AWS4-HMAC-SHA256"
#define SIGV4_UNSIGNED_PAYLOAD	"UNSIGNED-PAYLOAD"
#define SIGV4_MAX_AUTH_LEN		8192	/* Authorization header */
#define SIGV4_MAX_PARAM_LEN		8192	/* one presigned parameter */
#define SIGV4_MAX_SIGNED_HEADERS 64
#define SIGV4_MAX_HEADER_NAME	128
#define SIGV4_MAX_PATH			16384
#define SIGV4_MAX_QUERY_PAIRS	4096
#define SIGV4_MAX_EXPIRES		604800	/* a week, as AWS */
#define SIGV4_SHA256_LEN		32
#define SIGV4_HEX_LEN			64

/* One query-string pair: decoded (for lookups) and re-encoded (to sign). */
typedef struct SigQueryPair
{
	char	   *name;			/* decoded, NUL-terminated */
	size_t		name_len;		/* decoded length (a %00 shortens strlen) */
	char	   *value;
	size_t		value_len;
	char	   *enc_name;		/* AWS-encoded */
	char	   *enc_value;
} SigQueryPair;

/* What the request claims: the fields of either form. */
typedef struct SigClaim
{
	bool		presigned;
	const char *credential;		/* key/date/region/service/aws4_request */
	const char *signed_headers; /* a;b;c */
	const char *signature;		/* hex */
	char		amz_date[17];	/* YYYYMMDDTHHMMSSZ */
	TimestampTz date;
	int			expires;		/* presigned X-Amz-Expires, -1 when none */
	const char *query_payload_hash; /* presigned X-Amz-Content-Sha256 */
	/* from the credential */
	char		key_id[129];
	char		scope_date[9];
	char		region[64];
	char		service[4];		/* "sqs", or "sts" (GetCallerIdentity only) */
	/* the signed headers, sorted */
	int			nsigned;
	char	   *signed_names[SIGV4_MAX_SIGNED_HEADERS];
} SigClaim;

static SPIPlanPtr secret_plan = NULL;

static const char sig_message[] =
"The request signature we calculated does not match the signature you provided. "
"Check your AWS Secret Access Key and signing method. "
"Consult the service documentation for details.";

/* True for RFC 3986's unreserved characters, which AWS never encodes. */
static inline bool
is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		(c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
		c == '~';
}

/* Append len bytes of s, AWS-encoded (upper-case hex); keep '/' if asked. */
static void
append_encoded(StringInfo out, const char *s, size_t len, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t		i;

	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (is_unreserved(c) || (keep_slash && c == '/'))
			appendStringInfoChar(out, (char) c);
		else
		{
			appendStringInfoChar(out, '%');
			appendStringInfoChar(out, hex[c >> 4]);
			appendStringInfoChar(out, hex[c & 15]);
		}
	}
}

/* Lower-case hex of n bytes into out (2n + 1 bytes). */
static void
to_hex(const unsigned char *in, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t		i;

	for (i = 0; i < n; i++)
	{
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode s[0..len) ('+' stays '+', a stray '%' stays itself). */
static char *
percent_decode(const char *s, size_t len, size_t *out_len)
{
	char	   *out = palloc(len + 1);
	size_t		i,
				o = 0;

	for (i = 0; i < len; i++)
	{
		int			hi,
					lo;

		if (s[i] == '%' && i + 2 < len &&
			(hi = hex_value(s[i + 1])) >= 0 && (lo = hex_value(s[i + 2])) >= 0)
		{
			out[o++] = (char) ((hi << 4) | lo);
			i += 2;
		}
		else
			out[o++] = s[i];
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}

/* SHA-256 of data (any length, including none) into out. */
static void
sha256(const void *data, size_t len, unsigned char *out)
{
	unsigned int out_len = 0;

	if (EVP_Digest(data, len, out, &out_len, EVP_sha256(), NULL) != 1 ||
		out_len != SIGV4_SHA256_LEN)
		elog(ERROR, "could not compute SHA-256");
}

/* HMAC-SHA-256 of data under key into out. */
static void
hmac_sha256(const unsigned char *key, size_t key_len,
			const void *data, size_t len, unsigned char *out)
{
	unsigned int out_len = 0;

	if (HMAC(EVP_sha256(), key, (int) key_len, data, len, out, &out_len) == NULL ||
		out_len != SIGV4_SHA256_LEN)
		elog(ERROR, "could not compute HMAC-SHA-256");
}

/* "YYYYMMDDTHHMMSSZ" of ts (UTC). */
static void
format_basic(TimestampTz ts, char *out)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		strlcpy(out, "?", 17);
	else
		snprintf(out, 17, "%04d%02d%02dT%02d%02d%02dZ",
				 tm.tm_year % 10000, tm.tm_mon, tm.tm_mday,
				 tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* n decimal digits at s, or -1. */
static int
digits(const char *s, int n)
{
	int			v = 0,
				i;

	for (i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* The UTC timestamp of a checked calendar time, or false. */
static bool
make_utc(int year, int mon, int day, int hour, int min, int sec,
		  TimestampTz *ts)
{
	struct pg_tm tm;

	if (year < 1970 || year > 9999 || mon < 1 || mon > 12 || day < 1 ||
		day > day_tab[isleap(year) ? 1 : 0][mon - 1] ||
		hour < 0 || hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 59)
		return false;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = year;
	tm.tm_mon = mon;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	return tm2timestamp(&tm, 0, NULL, ts) == 0;
}

/* Parse "YYYYMMDDTHHMMSSZ" exactly. */
static bool
parse_basic(const char *s, TimestampTz *ts)
{
	if (s == NULL || strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
		return false;
	return make_utc(digits(s, 4), digits(s + 4, 2), digits(s + 6, 2),
					 digits(s + 9, 2), digits(s + 11, 2), digits(s + 13, 2),
					 ts);
}

/*
 * Parse an HTTP date, RFC 1123 ("Sun, 06 Nov 1994 08:49:37 GMT"), also with
 * the zone written "UTC", "+0000" or "-0000" (botocore's formatdate).
 */
static bool
parse_http_date(const char *s, TimestampTz *ts)
{
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May",
	"Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	size_t		len;
	const char *p;
	const char *zone;
	int			mon = 0,
				i;

	if (s == NULL)
		return false;
	len = strlen(s);
	/* "Www, DD Mon YYYY HH:MM:SS " is 26 bytes, then the zone */
	if (len < 29 || len > 31 || s[3] != ',' || s[4] != ' ')
		return false;
	p = s + 5;
	if (p[2] != ' ' || p[6] != ' ' || p[11] != ' ' || p[14] != ':' ||
		p[17] != ':' || p[20] != ' ')
		return false;
	for (i = 0; i < 12; i++)
		if (strncmp(p + 3, months[i], 3) == 0)
			mon = i + 1;
	zone = p + 21;
	if (strcmp(zone, "GMT") != 0 && strcmp(zone, "UTC") != 0 &&
		strcmp(zone, "+0000") != 0 && strcmp(zone, "-0000") != 0)
		return false;
	return make_utc(digits(p + 7, 4), mon, digits(p, 2), digits(p + 12, 2),
					 digits(p + 15, 2), digits(p + 18, 2), ts);
}

/* The values of header lname joined by ',' (as repeats are signed); NULL. */
static char *
header_joined(const SqsRequest *req, const char *lname, bool canonical)
{
	StringInfoData buf;
	bool		found = false;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < req->nheaders; i++)
	{
		const char *v;
		bool		blank = false;

		if (req->headers[i].name == NULL ||
			strcmp(req->headers[i].name, lname) != 0)
			continue;
		if (found)
			appendStringInfoChar(&buf, ',');
		found = true;
		v = req->headers[i].value ? req->headers[i].value : "";
		if (!canonical)
		{
			appendStringInfoString(&buf, v);
			continue;
		}
		/* trim, and make each run of blanks one space */
		while (*v == ' ' || *v == '\t')
			v++;
		for (; *v != '\0'; v++)
		{
			if (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n')
				blank = true;
			else
			{
				if (blank)
					appendStringInfoChar(&buf, ' ');
				blank = false;
				appendStringInfoChar(&buf, *v);
			}
		}
	}
	if (!found)
	{
		pfree(buf.data);
		return NULL;
	}
	return buf.data;
}

/* The query string's pairs, decoded and re-encoded; *n of them. */
static SigQueryPair *
parse_query(const char *raw, int *n)
{
	SigQueryPair *pairs;
	int			count = 1;
	const char *p;
	StringInfoData enc;

	*n = 0;
	if (raw == NULL || raw[0] == '\0')
		return NULL;
	if (strlen(raw) > SQS_MAX_BODY)
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH, "The query string is too long.");
	for (p = raw; *p != '\0'; p++)
		if (*p == '&')
			count++;
	if (count > SIGV4_MAX_QUERY_PAIRS)
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
				 "The query string has more than %d parameters.",
				 SIGV4_MAX_QUERY_PAIRS);
	pairs = palloc0(sizeof(SigQueryPair) * count);
	initStringInfo(&enc);
	p = raw;
	for (;;)
	{
		const char *end = strchr(p, '&');
		const char *eq;
		size_t		len = end ? (size_t) (end - p) : strlen(p);

		/* an empty piece ("a=1&&b=2") is no parameter */
		if (len > 0)
		{
			SigQueryPair *pair = &pairs[*n];

			eq = memchr(p, '=', len);
			pair->name = percent_decode(p, eq ? (size_t) (eq - p) : len,
										&pair->name_len);
			if (eq)
				pair->value = percent_decode(eq + 1, len - (eq - p) - 1,
											 &pair->value_len);
			else
				pair->value = percent_decode("", 0, &pair->value_len);
			resetStringInfo(&enc);
			append_encoded(&enc, pair->name, pair->name_len, false);
			pair->enc_name = pstrdup(enc.data);
			resetStringInfo(&enc);
			append_encoded(&enc, pair->value, pair->value_len, false);
			pair->enc_value = pstrdup(enc.data);
			(*n)++;
		}
		if (end == NULL)
			break;
		p = end + 1;
	}
	pfree(enc.data);
	return pairs;
}

/* Sort order of the canonical query: encoded name, then encoded value. */
static int
pair_cmp(const void *a, const void *b)
{
	const SigQueryPair *x = a;
	const SigQueryPair *y = b;
	int			c = strcmp(x->enc_name, y->enc_name);

	return c != 0 ? c : strcmp(x->enc_value, y->enc_value);
}

/*
 * The decoded value of the presigned parameter name (exact, once), or NULL.
 * A repeat, a NUL inside or an oversized value is IncompleteSignature.
 */
static const char *
query_param(SigQueryPair *pairs, int n, const char *name)
{
	const char *found = NULL;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (pairs[i].name_len != strlen(pairs[i].name) ||
			pg_strcasecmp(pairs[i].name, name) != 0)
			continue;
		if (found != NULL)
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "AWS query-string parameter '%s' appears more than once.", name);
		if (pairs[i].value_len != strlen(pairs[i].value) ||
			pairs[i].value_len > SIGV4_MAX_PARAM_LEN)
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "AWS query-string parameter '%s' is malformed.", name);
		found = pairs[i].value;
	}
	return found;
}

/* Read the Authorization header's three components into claim. */
static void
parse_authorization(const char *auth, SigClaim *claim)
{
	char	   *copy;
	char	   *p;
	size_t		alen = strlen(SIGV4_ALGORITHM);

	if (strlen(auth) > SIGV4_MAX_AUTH_LEN)
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "The Authorization header is longer than %d bytes.",
				 SIGV4_MAX_AUTH_LEN);
	if (strncmp(auth, SIGV4_ALGORITHM, alen) != 0 ||
		(auth[alen] != ' ' && auth[alen] != '\t'))
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "Unsupported AWS 'algorithm': only '%s' is accepted.",
				 SIGV4_ALGORITHM);
	copy = pstrdup(auth + alen);
	p = copy;
	/* components are separated by ','; at most a few, bounded by length */
	while (p != NULL && *p != '\0')
	{
		char	   *comma = strchr(p, ',');
		char	   *eq;
		char	   *end;
		const char **slot = NULL;

		if (comma)
			*comma = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		end = p + strlen(p);
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*p != '\0')
		{
			eq = strchr(p, '=');
			if (eq == NULL)
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "Authorization header components must be name=value pairs separated by ','.");
			*eq = '\0';
			if (strcmp(p, "Credential") == 0)
				slot = &claim->credential;
			else if (strcmp(p, "SignedHeaders") == 0)
				slot = &claim->signed_headers;
			else if (strcmp(p, "Signature") == 0)
				slot = &claim->signature;
			else
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "Authorization header components are 'Credential', 'SignedHeaders' and 'Signature'.");
			if (*slot != NULL)
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "Authorization header has '%s' more than once.", p);
			*slot = eq + 1;
		}
		p = comma ? comma + 1 : NULL;
	}
	if (claim->credential == NULL)
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "Authorization header requires 'Credential' parameter.");
	if (claim->signed_headers == NULL)
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "Authorization header requires 'SignedHeaders' parameter.");
	if (claim->signature == NULL)
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "Authorization header requires 'Signature' parameter.");
}

/* Split key/date/region/service/aws4_request and check the scope. */
static void
parse_credential(SigClaim *claim)
{
	const char *c = claim->credential;
	const char *slash[4];
	int			found = 0;
	const char *p;
	size_t		len = strlen(c);
	size_t		key_len,
				region_len;

	/* the last four '/' from the right; the key is what is before them */
	for (p = c + len; p > c && found < 4;)
	{
		p--;
		if (*p == '/')
			slash[found++] = p;
	}
	if (found < 4)
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term.");
	/* slash[3] ends the key, slash[2] the date, [1] region, [0] service */
	if (strcmp(slash[0] + 1, "aws4_request") != 0)
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
				 "Credential should be scoped with a valid terminator: 'aws4_request'.");
	/* sts: STS GetCallerIdentity, which protocol.c alone lets through */
	if (slash[0] - slash[1] - 1 != 3 ||
		(strncmp(slash[1] + 1, "sqs", 3) != 0 && strncmp(slash[1] + 1, "sts", 3) != 0))
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
				 "Credential should be scoped to correct service: 'sqs'.");
	memcpy(claim->service, slash[1] + 1, 3);
	claim->service[3] = '\0';
	key_len = slash[3] - c;
	if (key_len == 0 || key_len >= sizeof(claim->key_id))
		sqs_fail(SQS_ERR_INVALID_CLIENT_TOKEN_ID,
				 "The security token included in the request is invalid.");
	for (p = c; p < slash[3]; p++)
		if (*p <= ' ' || *p > '~')
			sqs_fail(SQS_ERR_INVALID_CLIENT_TOKEN_ID,
					 "The security token included in the request is invalid.");
	memcpy(claim->key_id, c, key_len);
	claim->key_id[key_len] = '\0';
	if (slash[2] - slash[3] - 1 != 8 || digits(slash[3] + 1, 8) < 0)
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "Credential's date must be 8 digits (yyyymmdd).");
	memcpy(claim->scope_date, slash[3] + 1, 8);
	claim->scope_date[8] = '\0';
	region_len = slash[1] - slash[2] - 1;
	if (region_len == 0 || region_len >= sizeof(claim->region))
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
				 "Credential should be scoped to a valid region.");
	for (p = slash[2] + 1; p < slash[1]; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
					 "Credential should be scoped to a valid region.");
	memcpy(claim->region, slash[2] + 1, region_len);
	claim->region[region_len] = '\0';
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* SignedHeaders into claim->signed_names, checked, sorted, distinct. */
static void
parse_signed_headers(SigClaim *claim)
{
	char	   *copy = pstrdup(claim->signed_headers);
	char	   *p = copy;
	bool		host = false;
	int			i;

	claim->nsigned = 0;
	while (p != NULL)
	{
		char	   *semi = strchr(p, ';');
		char	   *q;

		if (semi)
			*semi = '\0';
		if (*p == '\0' || strlen(p) > SIGV4_MAX_HEADER_NAME)
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "SignedHeaders must be lower-case header names separated by ';'.");
		for (q = p; *q != '\0'; q++)
			if (!((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
				  *q == '-' || *q == '_' || *q == '.'))
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "SignedHeaders must be lower-case header names separated by ';'.");
		if (claim->nsigned >= SIGV4_MAX_SIGNED_HEADERS)
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "SignedHeaders lists more than %d headers.",
					 SIGV4_MAX_SIGNED_HEADERS);
		claim->signed_names[claim->nsigned++] = p;
		if (strcmp(p, "host") == 0)
			host = true;
		p = semi ? semi + 1 : NULL;
	}
	qsort(claim->signed_names, claim->nsigned, sizeof(char *), name_cmp);
	for (i = 1; i < claim->nsigned; i++)
		if (strcmp(claim->signed_names[i - 1], claim->signed_names[i]) == 0)
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "SignedHeaders lists '%s' more than once.",
					 claim->signed_names[i]);
	if (!host)
		sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
				 "'Host' must be a 'SignedHeader' in the AWS Authorization.");
}

/* The request's date against now (and the presigned lifetime). */
static void
check_time(const SigClaim *claim, TimestampTz now)
{
	int64		skew = (int64) SQS_MAX_SKEW_SECS * USECS_PER_SEC;
	char		now_s[17],
				edge[17];

	format_basic(now, now_s);
	if (claim->date - skew > now)
	{
		format_basic(now + skew, edge);
		sqs_fail(SQS_ERR_REQUEST_EXPIRED,
				 "Signature not yet current: %s is still later than %s (%s + 15 min.)",
				 claim->amz_date, edge, now_s);
	}
	if (claim->presigned && claim->expires >= 0)
	{
		if (now > claim->date + (int64) claim->expires * USECS_PER_SEC)
			sqs_fail(SQS_ERR_REQUEST_EXPIRED, "Request has expired");
	}
	else if (claim->date + skew < now)
	{
		format_basic(now - skew, edge);
		sqs_fail(SQS_ERR_REQUEST_EXPIRED,
				 "Signature expired: %s is now earlier than %s (%s - 15 min.)",
				 claim->amz_date, edge, now_s);
	}
}

/* The key's role and secret; InvalidClientTokenId when there is none. */
static char *
lookup_secret(const char *key_id, Oid *role)
{
	Datum		arg;
	char		nulls = ' ';
	bool		isnull;
	Datum		d;
	char	   *secret;
	int			rc;

	if (secret_plan == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};
		SPIPlanPtr	plan;

		plan = SPI_prepare("SELECT role, secret FROM queue._access_key_secret($1)",
						   1, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		secret_plan = plan;
	}
	arg = CStringGetTextDatum(key_id);
	rc = SPI_execute_plan(secret_plan, &arg, &nulls, false, 2);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "queue._access_key_secret failed: %s", SPI_result_code_string(rc));
	if (SPI_processed != 1)
		sqs_fail(SQS_ERR_INVALID_CLIENT_TOKEN_ID,
				 "The security token included in the request is invalid.");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		sqs_fail(SQS_ERR_INVALID_CLIENT_TOKEN_ID,
				 "The security token included in the request is invalid.");
	*role = DatumGetObjectId(d);
	secret = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	if (secret == NULL)
		sqs_fail(SQS_ERR_INVALID_CLIENT_TOKEN_ID,
				 "The security token included in the request is invalid.");
	return secret;
}

/*
 * Canonical request without its last line (the payload hash), which the
 * caller appends: the same text serves each payload hash tried.
 */
static void
canonical_request_head(const SqsRequest *req, const SigClaim *claim,
					   SigQueryPair *pairs, int npairs, StringInfo out)
{
	const char *path = req->raw_path ? req->raw_path : "";
	size_t		path_len = strlen(path);
	const char **segs;
	size_t	   *seg_lens;
	int			nseg = 0;
	int			maxseg = 1;
	const char *p;
	int			i;
	bool		first = true;

	if (path_len > SIGV4_MAX_PATH)
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH, "The request path is too long.");

	appendStringInfoString(out, req->method ? req->method : "");
	appendStringInfoChar(out, '\n');

	/* the path: segments without "", "." and ".." (which drops one) */
	for (p = path; *p != '\0'; p++)
		if (*p == '/')
			maxseg++;
	segs = palloc(sizeof(char *) * maxseg);
	seg_lens = palloc(sizeof(size_t) * maxseg);
	p = path;
	for (;;)
	{
		const char *slash = strchr(p, '/');
		size_t		len = slash ? (size_t) (slash - p) : strlen(p);

		if (len == 0 || (len == 1 && p[0] == '.'))
			 /* skip */ ;
		else if (len == 2 && p[0] == '.' && p[1] == '.')
		{
			if (nseg > 0)
				nseg--;
		}
		else
		{
			segs[nseg] = p;
			seg_lens[nseg] = len;
			nseg++;
		}
		if (slash == NULL)
			break;
		p = slash + 1;
	}
	if (path[0] == '/' || nseg == 0)
		appendStringInfoChar(out, '/');
	for (i = 0; i < nseg; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, '/');
		append_encoded(out, segs[i], seg_lens[i], false);
	}
	if (nseg > 0 && path_len > 0 && path[path_len - 1] == '/')
		appendStringInfoChar(out, '/');
	appendStringInfoChar(out, '\n');

	/* the query, sorted, without the signature */
	if (npairs > 1)
		qsort(pairs, npairs, sizeof(SigQueryPair), pair_cmp);
	for (i = 0; i < npairs; i++)
	{
		if (claim->presigned &&
			pg_strcasecmp(pairs[i].name, "X-Amz-Signature") == 0 &&
			pairs[i].name_len == strlen("X-Amz-Signature"))
			continue;
		if (!first)
			appendStringInfoChar(out, '&');
		first = false;
		appendStringInfo(out, "%s=%s", pairs[i].enc_name, pairs[i].enc_value);
	}
	appendStringInfoChar(out, '\n');

	/* the signed headers; one that is not there signs as empty */
	for (i = 0; i < claim->nsigned; i++)
	{
		char	   *v = header_joined(req, claim->signed_names[i], true);

		appendStringInfo(out, "%s:%s\n", claim->signed_names[i], v ? v : "");
	}
	appendStringInfoChar(out, '\n');
	for (i = 0; i < claim->nsigned; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ';');
		appendStringInfoString(out, claim->signed_names[i]);
	}
	appendStringInfoChar(out, '\n');
}

/* Hex signature of canonical under the derived key. */
static void
sign_canonical(const char *canonical, size_t canonical_len,
			   const SigClaim *claim, const unsigned char *signing_key,
			   char *hex)
{
	unsigned char digest[SIGV4_SHA256_LEN];
	char		digest_hex[SIGV4_HEX_LEN + 1];
	StringInfoData sts;

	sha256(canonical, canonical_len, digest);
	to_hex(digest, sizeof(digest), digest_hex);
	initStringInfo(&sts);
	appendStringInfo(&sts, "%s\n%s\n%s/%s/%s/aws4_request\n%s",
					 SIGV4_ALGORITHM, claim->amz_date, claim->scope_date,
					 claim->region, claim->service, digest_hex);
	hmac_sha256(signing_key, SIGV4_SHA256_LEN, sts.data, sts.len, digest);
	to_hex(digest, sizeof(digest), hex);
	pfree(sts.data);
}

/* HMAC chain "AWS4"+secret -> date -> region -> service -> "aws4_request". */
static void
derive_key(const char *secret, const SigClaim *claim, unsigned char *key)
{
	size_t		slen = strlen(secret);
	unsigned char *k0 = palloc(slen + 4);
	unsigned char k[SIGV4_SHA256_LEN];

	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, secret, slen);
	hmac_sha256(k0, slen + 4, claim->scope_date, 8, k);
	explicit_bzero(k0, slen + 4);
	pfree(k0);
	hmac_sha256(k, sizeof(k), claim->region, strlen(claim->region), key);
	hmac_sha256(key, SIGV4_SHA256_LEN, claim->service, 3, k);
	hmac_sha256(k, sizeof(k), "aws4_request", 12, key);
	explicit_bzero(k, sizeof(k));
}

/* Constant-time equality of the expected hex and the claimed signature. */
static bool
signature_equal(const char *expected, const char *claimed)
{
	char		padded[SIGV4_HEX_LEN];
	size_t		len = strlen(claimed);
	bool		same_len = (len == SIGV4_HEX_LEN);

	memset(padded, 0, sizeof(padded));
	memcpy(padded, claimed, Min(len, sizeof(padded)));
	return (CRYPTO_memcmp(expected, padded, SIGV4_HEX_LEN) == 0) & same_len;
}

/*
 * Verify req (see the file header); fill auth.  Every refusal is one of
 * SQS's 403 errors through sqs_fail.
 */
void
sqs_verify(const SqsRequest *req, TimestampTz now, SqsAuth *auth)
{
	SigClaim	claim;
	SigQueryPair *pairs;
	int			npairs;
	char	   *authz;
	const char *claimed_hash = NULL;
	unsigned char body_digest[SIGV4_SHA256_LEN];
	char		body_hex[SIGV4_HEX_LEN + 1];
	const char *hashes[2];
	int			nhashes = 0;
	StringInfoData canonical;
	int			head_len;
	char	   *secret;
	Oid			role;
	unsigned char signing_key[SIGV4_SHA256_LEN];
	bool		ok = false;
	bool		unsigned_payload = false;
	int			i;

	memset(&claim, 0, sizeof(claim));
	claim.expires = -1;
	pairs = parse_query(req->raw_query, &npairs);

	/* which form, and its fields */
	authz = header_joined(req, "authorization", false);
	if (authz != NULL)
	{
		const char *date;

		parse_authorization(authz, &claim);
		date = header_joined(req, "x-amz-date", false);
		if (date != NULL)
		{
			if (!parse_basic(date, &claim.date))
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "X-Amz-Date must be in the ISO-8601 basic format yyyyMMdd'T'HHmmss'Z'.");
		}
		else
		{
			date = header_joined(req, "date", false);
			if (date == NULL)
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.");
			if (!parse_http_date(date, &claim.date))
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "Date must be an RFC 1123 date (Sun, 06 Nov 1994 08:49:37 GMT).");
		}
	}
	else
	{
		const char *alg = query_param(pairs, npairs, "X-Amz-Algorithm");
		const char *date;
		const char *expires;

		claim.credential = query_param(pairs, npairs, "X-Amz-Credential");
		claim.signed_headers = query_param(pairs, npairs, "X-Amz-SignedHeaders");
		claim.signature = query_param(pairs, npairs, "X-Amz-Signature");
		date = query_param(pairs, npairs, "X-Amz-Date");
		expires = query_param(pairs, npairs, "X-Amz-Expires");
		if (alg == NULL && claim.credential == NULL && claim.signature == NULL)
			sqs_fail(SQS_ERR_MISSING_AUTHENTICATION_TOKEN,
					 "Request is missing Authentication Token");
		claim.presigned = true;
		if (alg == NULL || claim.credential == NULL ||
			claim.signed_headers == NULL || claim.signature == NULL ||
			date == NULL)
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "AWS query-string parameters must include 'X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Signature', 'X-Amz-Date' and 'X-Amz-SignedHeaders'. Re-examine the query-string parameters.");
		if (strcmp(alg, SIGV4_ALGORITHM) != 0)
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "X-Amz-Algorithm only supports \"%s\".", SIGV4_ALGORITHM);
		if (!parse_basic(date, &claim.date))
			sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
					 "X-Amz-Date must be in the ISO-8601 basic format yyyyMMdd'T'HHmmss'Z'.");
		if (expires != NULL)
		{
			size_t		elen = strlen(expires);

			if (elen == 0 || elen > 6 || digits(expires, (int) elen) < 1 ||
				digits(expires, (int) elen) > SIGV4_MAX_EXPIRES)
				sqs_fail(SQS_ERR_INCOMPLETE_SIGNATURE,
						 "X-Amz-Expires must be a number of seconds from 1 to %d.",
						 SIGV4_MAX_EXPIRES);
			claim.expires = digits(expires, (int) elen);
		}
		claim.query_payload_hash = query_param(pairs, npairs, "X-Amz-Content-Sha256");
	}
	format_basic(claim.date, claim.amz_date);

	parse_credential(&claim);
	if (strncmp(claim.amz_date, claim.scope_date, 8) != 0)
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
				 "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%.8s'.",
				 claim.scope_date, claim.amz_date);
	parse_signed_headers(&claim);
	check_time(&claim, now);

	/* the payload hashes to try */
	sha256(req->body_len > 0 ? req->body : "", req->body_len, body_digest);
	to_hex(body_digest, sizeof(body_digest), body_hex);
	for (i = 0; i < claim.nsigned; i++)
		if (strcmp(claim.signed_names[i], "x-amz-content-sha256") == 0)
			claimed_hash = header_joined(req, "x-amz-content-sha256", true);
	if (claimed_hash == NULL && claim.presigned)
		claimed_hash = claim.query_payload_hash;
	if (claimed_hash != NULL)
	{
		if (strcmp(claimed_hash, SIGV4_UNSIGNED_PAYLOAD) == 0)
		{
			if (!claim.presigned)
				sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
						 "UNSIGNED-PAYLOAD is accepted in presigned requests only.");
		}
		else if (pg_strcasecmp(claimed_hash, body_hex) != 0)
			sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
					 "The provided 'x-amz-content-sha256' header does not match what was computed.");
		hashes[nhashes++] = claimed_hash;
	}
	else
	{
		hashes[nhashes++] = body_hex;
		if (claim.presigned)
			hashes[nhashes++] = SIGV4_UNSIGNED_PAYLOAD;
	}

	/* the key, then each candidate canonical request */
	secret = lookup_secret(claim.key_id, &role);
	derive_key(secret, &claim, signing_key);
	explicit_bzero(secret, strlen(secret));

	initStringInfo(&canonical);
	canonical_request_head(req, &claim, pairs, npairs, &canonical);
	head_len = canonical.len;
	for (i = 0; i < nhashes; i++)
	{
		char		expected[SIGV4_HEX_LEN + 1];

		canonical.len = head_len;
		canonical.data[head_len] = '\0';
		appendStringInfoString(&canonical, hashes[i]);
		sign_canonical(canonical.data, canonical.len, &claim, signing_key,
					   expected);
		if (signature_equal(expected, claim.signature))
		{
			ok = true;
			unsigned_payload = strcmp(hashes[i], SIGV4_UNSIGNED_PAYLOAD) == 0;
		}
	}
	explicit_bzero(signing_key, sizeof(signing_key));
	if (!ok)
		sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH, "%s", sig_message);

	/*
	 * A presigned request authorises what it signed, nothing more: with
	 * UNSIGNED-PAYLOAD it carries no body (whose form parameters would
	 * join the signed query's), and an X-Amz-Target header, which names
	 * the action, must be among its signed headers.  Otherwise a URL
	 * presigned for one action would serve as any other of its key.
	 */
	if (claim.presigned)
	{
		bool		target_signed = false;

		if (unsigned_payload && req->body_len > 0)
			sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
					 "A presigned request signed with UNSIGNED-PAYLOAD cannot carry a body: put its parameters in the signed query string.");
		for (i = 0; i < claim.nsigned; i++)
			if (strcmp(claim.signed_names[i], "x-amz-target") == 0)
				target_signed = true;
		if (!target_signed && sqs_header(req, "x-amz-target") != NULL)
			sqs_fail(SQS_ERR_SIGNATURE_DOES_NOT_MATCH,
					 "The X-Amz-Target header of a presigned request must be among its signed headers.");
	}

	/* A key works only while its role may log in (the core's acl.c) */
	if (!queue_role_may_log_in(role, now))
		sqs_fail(SQS_ERR_INVALID_CLIENT_TOKEN_ID,
				 "The security token included in the request is invalid.");

	auth->role = role;
	strlcpy(auth->access_key_id, claim.key_id, sizeof(auth->access_key_id));
	strlcpy(auth->region, claim.region, sizeof(auth->region));
	strlcpy(auth->service, claim.service, sizeof(auth->service));
}
