/*-------------------------------------------------------------------------
 *
 * query.h
 *	  What query.c, the Query protocol's own parts, offers protocol.c, the
 *	  one file above it that includes this: parameters folded into the
 *	  JSON input shape, the XML answer, the queue a request's path names.
 *	  query.c calls only wire.c (sqs.h) and PostgreSQL, never protocol.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SQS_QUERY_H
#define QUEUE_SQS_QUERY_H

#include "lib/stringinfo.h"

#include "sqs.h"

/* The namespace of SQS's Query XML, answers and errors alike */
#define SQS_XMLNS "http://queue.amazonaws.com/doc/2012-11-05/"

/*
 * A Query request's parameters as the action's JSON input shape, as JSON
 * text, every scalar a string; the envelope (Action, Version, X-Amz-*)
 * left out.  Malformed parameters: sqs_fail.
 */
extern char *sqs_fold_query(const SqsRequest *req, const char *action);

/*
 * The Query answer of an action whose output shape (JSON text) is out,
 * appended to buf as XML; sqs_query_has_result says whether it has the
 * <XResult> element (and, in Query's JSON, the "<Action>Result" member).
 */
extern void sqs_xml_render(StringInfo buf, const char *action, const char *out,
						   const char *request_id);
extern bool sqs_query_has_result(const char *action);

/* <name>s, escaped as SQS escapes XML text</name> */
extern void sqs_xml_text_element(StringInfo buf, const char *name,
								 const char *s, size_t len);

/* The queue a Query request's path names (/<account>/<queue>), or NULL */
extern const char *sqs_path_queue_name(const char *raw_path);

#endif							/* QUEUE_SQS_QUERY_H */
