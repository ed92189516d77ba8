/*
 * sqs_bench.c: the SQS endpoint under load, with libcurl (keep-alive) and
 * SigV4 requests in the AWS JSON 1.0 protocol, as the current SDKs send.
 *
 *   sqs_bench cycle    URL KEY SECRET QUEUE CLIENTS BATCH SECONDS
 *   sqs_bench longpoll URL KEY SECRET QUEUE ROUNDS CONNINFO
 *   sqs_bench park     URL KEY SECRET QUEUE N SECONDS
 *
 * cycle: CLIENTS threads, each a keep-alive connection, loop
 *   SendMessage(Batch) -> ReceiveMessage(MaxNumberOfMessages BATCH) ->
 *   DeleteMessage(Batch) for SECONDS; prints "messages/s" of the cycle
 *   (messages deleted / elapsed).  BATCH 1 uses the single-message actions.
 * longpoll: ROUNDS times a ReceiveMessage with WaitTimeSeconds 20 parks
 *   (given 50 ms to get there), a send through libpq (CONNINFO,
 *   autocommit: it has committed when PQexec returns) wakes it; a sample
 *   is the time from PQexec's return to the HTTP answer.  Prints median,
 *   p99 and max in milliseconds.
 * park: N long polls (WaitTimeSeconds 20) held open at once through one
 *   curl multi handle for SECONDS; the caller measures the workers'
 *   memory meanwhile.  Prints how many were still parked at the end.
 *
 * The signing follows AWS's SigV4 description (REFERENCE.md 1.7); it is
 * test code, checked by the endpoint accepting it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "libpq-fe.h"

static const char *url;
static const char *key;
static const char *secret;
static const char *queue_name;
static char host[256];

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
hex(const unsigned char *in, int n, char *out)
{
	for (int i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", in[i]);
	out[2 * n] = '\0';
}

static void
sha256_hex(const char *data, size_t len, char *out)
{
	unsigned char d[32];

	SHA256((const unsigned char *) data, len, d);
	hex(d, 32, out);
}

static void
hmac(const unsigned char *k, int klen, const char *msg, unsigned char *out)
{
	unsigned int olen = 32;

	HMAC(EVP_sha256(), k, klen, (const unsigned char *) msg, strlen(msg), out, &olen);
}

typedef struct Buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} Buf;

static size_t
collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Buf		   *b = userdata;
	size_t		n = size * nmemb;

	if (b->len + n + 1 > b->cap)
	{
		b->cap = (b->len + n + 1) * 2;
		b->data = realloc(b->data, b->cap);
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

/* Headers of a signed AWS JSON 1.0 request of action with body. */
static struct curl_slist *
signed_headers(const char *action, const char *body)
{
	char		amzdate[32],
				date[16],
				payload[65],
				creq_hash[65],
				sig[65];
	char		target[128],
				creq[4096],
				sts[1024],
				scope[128],
				auth[512],
				h[256];
	unsigned char k1[32],
				k2[32],
				k3[32],
				k4[32],
				s[32];
	char		ksecret[256];
	time_t		t = time(NULL);
	struct tm	tm;
	struct curl_slist *hl = NULL;

	gmtime_r(&t, &tm);
	strftime(amzdate, sizeof(amzdate), "%Y%m%dT%H%M%SZ", &tm);
	strftime(date, sizeof(date), "%Y%m%d", &tm);
	snprintf(target, sizeof(target), "AmazonSQS.%s", action);
	sha256_hex(body, strlen(body), payload);
	snprintf(creq, sizeof(creq),
			 "POST\n/\n\ncontent-type:application/x-amz-json-1.0\nhost:%s\nx-amz-date:%s\nx-amz-target:%s\n\n"
			 "content-type;host;x-amz-date;x-amz-target\n%s",
			 host, amzdate, target, payload);
	sha256_hex(creq, strlen(creq), creq_hash);
	snprintf(scope, sizeof(scope), "%s/us-east-1/sqs/aws4_request", date);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", amzdate, scope, creq_hash);
	snprintf(ksecret, sizeof(ksecret), "AWS4%s", secret);
	hmac((unsigned char *) ksecret, strlen(ksecret), date, k1);
	hmac(k1, 32, "us-east-1", k2);
	hmac(k2, 32, "sqs", k3);
	hmac(k3, 32, "aws4_request", k4);
	hmac(k4, 32, sts, s);
	hex(s, 32, sig);
	snprintf(auth, sizeof(auth),
			 "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=%s",
			 key, scope, sig);
	hl = curl_slist_append(hl, auth);
	hl = curl_slist_append(hl, "Content-Type: application/x-amz-json-1.0");
	snprintf(h, sizeof(h), "X-Amz-Date: %s", amzdate);
	hl = curl_slist_append(hl, h);
	snprintf(h, sizeof(h), "X-Amz-Target: %s", target);
	hl = curl_slist_append(hl, h);
	hl = curl_slist_append(hl, "Expect:");
	return hl;
}

static void
prepare(CURL *c, const char *action, const char *body, Buf *out,
		struct curl_slist **hl)
{
	*hl = signed_headers(action, body);
	out->len = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hl);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
}

/* One request; exits on a transport error or a status other than 200. */
static void
call(CURL *c, const char *action, const char *body, Buf *out)
{
	struct curl_slist *hl;
	long		status = 0;
	CURLcode	rc;

	prepare(c, action, body, out, &hl);
	rc = curl_easy_perform(c);
	curl_slist_free_all(hl);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK || status != 200)
	{
		fprintf(stderr, "%s: %s, status %ld: %s\n", action, curl_easy_strerror(rc),
				status, out->data ? out->data : "");
		exit(1);
	}
}

/*
 * The receipts of a ReceiveMessage answer, as a JSON array of delete
 * entries (batch) or the first one alone.  Our receipts hold no quote or
 * backslash, so finding the member's string is enough here.
 */
static int
receipts(const char *json, char *entries, size_t cap, char *first, size_t fcap)
{
	int			n = 0;
	const char *p = json;
	size_t		used = 0;

	entries[0] = '\0';
	while ((p = strstr(p, "\"ReceiptHandle\"")) != NULL)
	{
		const char *v = strchr(p + 15, '"');
		const char *e;

		if (v == NULL)
			break;
		v++;
		e = strchr(v, '"');
		if (e == NULL)
			break;
		if (n == 0 && first != NULL && (size_t) (e - v) < fcap)
		{
			memcpy(first, v, e - v);
			first[e - v] = '\0';
		}
		used += snprintf(entries + used, cap - used, "%s{\"Id\":\"d%d\",\"ReceiptHandle\":\"%.*s\"}",
						 n ? "," : "", n, (int) (e - v), v);
		n++;
		p = e;
	}
	return n;
}

static int	clients,
			batch,
			seconds;
static long totals[256];

static void *
cycle_thread(void *arg)
{
	int			me = (int) (long) arg;
	CURL	   *c = curl_easy_init();
	Buf			out = {0};
	char	   *body = malloc(65536);
	char	   *entries = malloc(65536);
	char		first[512];
	double		end = now_ms() + seconds * 1000.0;
	long		done = 0;

	while (now_ms() < end)
	{
		int			n;

		if (batch == 1)
		{
			snprintf(body, 65536, "{\"QueueUrl\":\"%s\",\"MessageBody\":\"hello %d\"}", queue_name, me);
			call(c, "SendMessage", body, &out);
		}
		else
		{
			size_t		used = snprintf(body, 65536, "{\"QueueUrl\":\"%s\",\"Entries\":[", queue_name);

			for (int i = 0; i < batch; i++)
				used += snprintf(body + used, 65536 - used, "%s{\"Id\":\"m%d\",\"MessageBody\":\"hello %d\"}",
								 i ? "," : "", i, me);
			snprintf(body + used, 65536 - used, "]}");
			call(c, "SendMessageBatch", body, &out);
		}
		snprintf(body, 65536, "{\"QueueUrl\":\"%s\",\"MaxNumberOfMessages\":%d}", queue_name, batch);
		call(c, "ReceiveMessage", body, &out);
		n = receipts(out.data, entries, 65536, first, sizeof(first));
		if (n == 0)
			continue;
		if (batch == 1)
		{
			snprintf(body, 65536, "{\"QueueUrl\":\"%s\",\"ReceiptHandle\":\"%s\"}", queue_name, first);
			call(c, "DeleteMessage", body, &out);
		}
		else
		{
			snprintf(body, 65536, "{\"QueueUrl\":\"%s\",\"Entries\":[%s]}", queue_name, entries);
			call(c, "DeleteMessageBatch", body, &out);
		}
		done += n;
	}
	totals[me] = done;
	curl_easy_cleanup(c);
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	const char *p;

	if (argc < 8)
	{
		fprintf(stderr, "usage: see the head of sqs_bench.c\n");
		return 2;
	}
	url = argv[2];
	key = argv[3];
	secret = argv[4];
	queue_name = argv[5];
	p = strstr(url, "://");
	snprintf(host, sizeof(host), "%s", p ? p + 3 : url);
	if (strchr(host, '/'))
		*strchr(host, '/') = '\0';
	curl_global_init(CURL_GLOBAL_ALL);

	if (strcmp(argv[1], "cycle") == 0 && argc >= 9)
	{
		pthread_t	th[256];
		double		t0,
					t1;
		long		sum = 0;

		clients = atoi(argv[6]);
		batch = atoi(argv[7]);
		seconds = atoi(argv[8]);
		if (clients < 1 || clients > 256 || batch < 1 || batch > 10)
			return 2;
		t0 = now_ms();
		for (long i = 0; i < clients; i++)
			pthread_create(&th[i], NULL, cycle_thread, (void *) i);
		for (int i = 0; i < clients; i++)
			pthread_join(th[i], NULL);
		t1 = now_ms();
		for (int i = 0; i < clients; i++)
			sum += totals[i];
		printf("%.0f messages/s (%ld messages in %.1f s)\n", sum * 1000.0 / (t1 - t0), sum, (t1 - t0) / 1000);
		return 0;
	}
	if (strcmp(argv[1], "longpoll") == 0)
	{
		int			rounds = atoi(argv[6]);
		PGconn	   *pg = PQconnectdb(argv[7]);
		CURLM	   *m = curl_multi_init();
		double	   *lat = calloc(rounds, sizeof(double));
		char		body[1024];
		const char *params[1] = {queue_name};

		if (PQstatus(pg) != CONNECTION_OK)
		{
			fprintf(stderr, "%s", PQerrorMessage(pg));
			return 1;
		}
		for (int r = 0; r < rounds; r++)
		{
			CURL	   *c = curl_easy_init();
			Buf			out = {0};
			struct curl_slist *hl;
			int			running = 1;
			double		t0,
						wait_until;
			PGresult   *res;
			char		entries[4096],
						first[512];

			snprintf(body, sizeof(body), "{\"QueueUrl\":\"%s\",\"MaxNumberOfMessages\":1,\"WaitTimeSeconds\":20}", queue_name);
			prepare(c, "ReceiveMessage", body, &out, &hl);
			curl_multi_add_handle(m, c);
			wait_until = now_ms() + 50;
			while (now_ms() < wait_until)
			{
				curl_multi_perform(m, &running);
				curl_multi_poll(m, NULL, 0, 5, NULL);
			}
			res = PQexecParams(pg, "SELECT queue.send($1, 'wake'::text)", 1, NULL, params, NULL, NULL, 0);
			t0 = now_ms();
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
			{
				fprintf(stderr, "%s", PQerrorMessage(pg));
				return 1;
			}
			PQclear(res);
			do
			{
				curl_multi_perform(m, &running);
				if (running)
					curl_multi_poll(m, NULL, 0, 1000, NULL);
			} while (running);
			lat[r] = now_ms() - t0;
			curl_multi_remove_handle(m, c);
			curl_slist_free_all(hl);
			if (out.data == NULL || receipts(out.data, entries, sizeof(entries), first, sizeof(first)) != 1)
			{
				fprintf(stderr, "round %d: no message: %s\n", r, out.data ? out.data : "");
				return 1;
			}
			snprintf(body, sizeof(body), "{\"QueueUrl\":\"%s\",\"ReceiptHandle\":\"%s\"}", queue_name, first);
			call(c, "DeleteMessage", body, &out);
			curl_easy_cleanup(c);
			free(out.data);
		}
		qsort(lat, rounds, sizeof(double), cmp_double);
		printf("median %.3f ms, p99 %.3f ms, max %.3f ms (%d rounds)\n",
			   lat[rounds / 2], lat[(int) (rounds * 0.99)], lat[rounds - 1], rounds);
		PQfinish(pg);
		return 0;
	}
	if (strcmp(argv[1], "park") == 0)
	{
		int			n = atoi(argv[6]);
		int			secs = atoi(argv[7]);
		CURLM	   *m = curl_multi_init();
		CURL	  **cs = calloc(n, sizeof(CURL *));
		Buf		   *outs = calloc(n, sizeof(Buf));
		struct curl_slist **hls = calloc(n, sizeof(struct curl_slist *));
		char		body[512];
		int			running = 0;
		double		end;

		curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long) n);
		snprintf(body, sizeof(body), "{\"QueueUrl\":\"%s\",\"MaxNumberOfMessages\":1,\"WaitTimeSeconds\":20}", queue_name);
		for (int i = 0; i < n; i++)
		{
			cs[i] = curl_easy_init();
			prepare(cs[i], "ReceiveMessage", body, &outs[i], &hls[i]);
			curl_easy_setopt(cs[i], CURLOPT_FRESH_CONNECT, 1L);
			curl_multi_add_handle(m, cs[i]);
		}
		end = now_ms() + secs * 1000.0;
		while (now_ms() < end)
		{
			curl_multi_perform(m, &running);
			curl_multi_poll(m, NULL, 0, 100, NULL);
		}
		printf("%d of %d long polls still parked after %d s\n", running, n, secs);
		fflush(stdout);
		return 0;
	}
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 2;
}
