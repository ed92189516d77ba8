/*-------------------------------------------------------------------------
 *
 * settle.c
 *	  Settling a received message: DeleteMessage, ChangeMessageVisibility
 *	  and their batches, each delete or change in a subtransaction, its
 *	  receipt's SQL error answered as SQS answers (a stale receipt's
 *	  DeleteMessage succeeds; settle_error).
 *
 * May call: statements.c, shape.c, wire.c (sqs_fail), PostgreSQL.
 * Called by: actions.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"

#include "common/compat.h"
#include "core_api.h"
#include "actions.h"

/* ---------------------------------------------------------------------
 * Settling: delete and change visibility
 * ---------------------------------------------------------------------
 */

/*
 * The SQS answer of a failed queue.delete / queue.change_visibility: the
 * SQS error, SQS_ERR_NONE with *ok set when SQS answers success, or
 * SQS_ERR_NONE with *ok unset when the SQL error is not one of a receipt's
 * (it is then raised as it is).  A forged receipt is 22P02; a stale one,
 * or one whose message is gone, or a visibility change after a FIFO
 * message's lease ended, is 55000 (a standard message's latest receipt
 * leases it again here, as SQS: the SQL API keeps the wire's rules while
 * the endpoint serves an action, queue_sqs_wire_rules, core_api.h).  On the wire the endpoint answers as SQS does (DESIGN.md
 * "SQS API"), though the SQL API refuses: a stale receipt's DeleteMessage
 * succeeds and deletes nothing ("the request succeeds, but the message
 * will not be deleted"); its ChangeMessageVisibility is
 * InvalidParameterValue, in SQS's words.
 */
static SqsError
settle_error(ErrorData *edata, bool change, const char *receipt,
			 const char **msg, bool *ok)
{
	/* SQS quotes the receipt in its messages; a receipt longer is no SQS's */
	int			rlen = (int) Min(strlen(receipt), 1024);

	*ok = false;
	if (edata->sqlerrcode == ERRCODE_INVALID_TEXT_REPRESENTATION)
	{
		*msg = psprintf("The input receipt handle \"%.*s\" is not a valid receipt handle.",
						rlen, receipt);
		return SQS_ERR_RECEIPT_HANDLE_IS_INVALID;
	}
	if (edata->sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
	{
		/* a FIFO delete after the lease ended (the wire's rule, core_api.h) */
		if (!change && edata->message != NULL &&
			strstr(edata->message, "for a lease that has ended") != NULL)
		{
			*msg = psprintf("Value %.*s for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
							rlen, receipt);
			return SQS_ERR_INVALID_PARAMETER_VALUE;
		}
		if (change)
		{
			*msg = psprintf("Value %.*s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.",
							rlen, receipt);
			return SQS_ERR_INVALID_PARAMETER_VALUE;
		}
		*ok = true;
		return SQS_ERR_NONE;
	}
	if (edata->sqlerrcode == ERRCODE_INVALID_PARAMETER_VALUE && change)
	{
		*msg = edata->message ? edata->message : "invalid visibility timeout";
		return SQS_ERR_INVALID_PARAMETER_VALUE;
	}
	return SQS_ERR_NONE;
}

/*
 * One delete or visibility change that ends the action, in a
 * subtransaction: a stale receipt's DeleteMessage must still commit (and
 * succeed), so its error cannot take the transaction with it.
 */
static void
settle_one(PlanKind k, Datum *v, bool change, const char *receipt)
{
	ErrorData  *edata;
	SqsError	err;
	const char *msg;
	bool		ok;

	edata = sqs_run_in_subxact(k, v, NULL, NULL);
	if (edata == NULL)
		return;
	err = settle_error(edata, change, receipt, &msg, &ok);
	if (ok)
		return;
	if (err == SQS_ERR_NONE)
		ReThrowError(edata);
	sqs_fail(err, "%s", msg);
}

void
sqs_act_delete_message(SqsCall *call, StringInfo out)
{
	char	   *name = sqs_queue_of(call);
	char	   *receipt = sqs_req_str(&call->input->root, "ReceiptHandle");
	Datum		v[2] = {CStringGetTextDatum(name), CStringGetTextDatum(receipt)};

	/* false (already deleted, its latest receipt): success, as SQS */
	settle_one(P_DELETE, v, false, receipt);
	appendStringInfoString(out, "{}");
}

void
sqs_act_change_message_visibility(SqsCall *call, StringInfo out)
{
	JsonbContainer *in = &call->input->root;
	char	   *name = sqs_queue_of(call);
	char	   *receipt = sqs_req_str(in, "ReceiptHandle");
	int64		timeout;
	Datum		v[3];

	if (!sqs_in_int(in, "VisibilityTimeout", 0, SQS_MAX_VISIBILITY, &timeout))
		sqs_fail(SQS_ERR_MISSING_PARAMETER,
				 "The request must contain the parameter VisibilityTimeout.");
	v[0] = CStringGetTextDatum(name);
	v[1] = CStringGetTextDatum(receipt);
	v[2] = sqs_secs_interval(timeout);
	settle_one(P_CHANGE_VIS, v, true, receipt);
	appendStringInfoString(out, "{}");
}

/*
 * DeleteMessageBatch and ChangeMessageVisibilityBatch: each entry in a
 * subtransaction of its own, so one bad receipt fails only its entry.
 */
static void
settle_batch(SqsCall *call, StringInfo out, bool change)
{
	char	   *name = sqs_queue_of(call);
	int			n;
	char	  **ids;
	JsonbContainer **entries = sqs_batch_entries(call, &n, &ids);
	SqsError   *errs = palloc0(n * sizeof(SqsError));
	const char **msgs = palloc0(n * sizeof(char *));
	bool		first_entry = true;
	StringInfoData ok;
	StringInfoData failed;

	for (int i = 0; i < n; i++)
	{
		char	   *receipt = sqs_in_str(entries[i], "ReceiptHandle");
		char	   *timeout_text = change ? sqs_in_str(entries[i], "VisibilityTimeout") : NULL;
		int64		timeout = 0;
		Datum		v[3];
		ErrorData  *edata;

		if (receipt == NULL)
		{
			errs[i] = SQS_ERR_MISSING_PARAMETER;
			msgs[i] = "The request must contain the parameter ReceiptHandle.";
			continue;
		}
		if (change && (timeout_text == NULL || !sqs_wire_int(timeout_text, &timeout) ||
					   timeout < 0 || timeout > SQS_MAX_VISIBILITY))
		{
			errs[i] = timeout_text == NULL ? SQS_ERR_MISSING_PARAMETER :
				SQS_ERR_INVALID_PARAMETER_VALUE;
			msgs[i] = timeout_text == NULL ?
				"The request must contain the parameter VisibilityTimeout." :
				"Value for parameter VisibilityTimeout is invalid. Reason: must be between 0 and 43200.";
			continue;
		}
		v[0] = CStringGetTextDatum(name);
		v[1] = CStringGetTextDatum(receipt);
		v[2] = sqs_secs_interval(timeout);
		edata = sqs_run_in_subxact(change ? P_CHANGE_VIS : P_DELETE, v, NULL, NULL);
		if (edata != NULL)
		{
			bool		ok;

			errs[i] = settle_error(edata, change, receipt, &msgs[i], &ok);
			if (errs[i] == SQS_ERR_NONE && !ok)
				ReThrowError(edata);
		}
	}

	initStringInfo(&ok);
	for (int i = 0; i < n; i++)
		if (errs[i] == SQS_ERR_NONE)
		{
			bool		first = true;

			if (!first_entry)
				appendStringInfoChar(&ok, ',');
			first_entry = false;
			appendStringInfoChar(&ok, '{');
			sqs_kv_str(&ok, &first, "Id", ids[i]);
			appendStringInfoChar(&ok, '}');
		}
	initStringInfo(&failed);
	first_entry = true;
	for (int i = 0; i < n; i++)
		if (errs[i] != SQS_ERR_NONE)
			sqs_failed_entry(&failed, &first_entry, ids[i], errs[i], msgs[i]);
	sqs_batch_result(out, &ok, &failed);
}

void
sqs_act_delete_message_batch(SqsCall *call, StringInfo out)
{
	settle_batch(call, out, false);
}

void
sqs_act_change_message_visibility_batch(SqsCall *call, StringInfo out)
{
	settle_batch(call, out, true);
}
