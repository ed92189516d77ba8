/*-------------------------------------------------------------------------
 *
 * plans.c
 *	  The hot-path statements of a queue, prepared once per backend.
 *
 * Each queue has its own message table, so each statement is prepared per
 * queue: the first call of a kind on a queue builds the text from the
 * queue's numeric id (never its name), prepares it and keeps the plan in the
 * queue's cache entry.  Later calls only bind parameters.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"

#include "queue.h"

typedef struct PlanSpec
{
	const char *sql;			/* %1$s is the message table */
	int			nargs;
	Oid			argtypes[6];
} PlanSpec;

#define MSG_COLUMNS \
	"message_id, body, attributes, message_group_id, deduplication_id," \
	" sequence_number, receive_count, sent_at, first_received_at, visible_at"

static const PlanSpec plan_specs[QP_NUM_PLANS] = {
	[QP_SEND] = {
		"INSERT INTO %1$s (message_id, visible_at, sent_at, message_group_id,"
		" deduplication_id, attributes, body)"
		" VALUES (nextval('queue_data.message_id_seq'), $1, $2, $3, $4, $5, $6)"
		" RETURNING message_id",
		6, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID}
	},

	/*
	 * One statement for the whole batch.  unnest pads missing arrays with
	 * NULLs and yields rows in array order, so the ids it draws (and the
	 * rows RETURNING gives back) follow the ordinals.
	 */
	[QP_SEND_BATCH] = {
		"INSERT INTO %1$s (message_id, visible_at, sent_at, message_group_id,"
		" deduplication_id, attributes, body)"
		" SELECT nextval('queue_data.message_id_seq'), $1, $2, u.g, u.d, u.a, u.b"
		" FROM unnest($3, $4, $5, $6) AS u(b, g, d, a)"
		" RETURNING message_id",
		6, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID,
		TEXTARRAYOID, JSONBARRAYOID}
	},

	/*
	 * The lease.  The inner scan walks the (visible_at, message_id) index
	 * from its start, so in-flight and delayed messages (visible_at in the
	 * future) are never visited; SKIP LOCKED passes over rows another
	 * receive is taking.  "= ANY (ARRAY(...))" keeps the outer update on the
	 * primary key whatever the planner thinks of the table's size.
	 */
	[QP_RECEIVE] = {
		"UPDATE %1$s m SET visible_at = $2, receipt = $3,"
		" receive_count = m.receive_count + 1,"
		" first_received_at = coalesce(m.first_received_at, $1)"
		" WHERE m.message_id = ANY (ARRAY("
		"  SELECT message_id FROM %1$s"
		"  WHERE visible_at <= $1 AND sent_at > $4"
		"  ORDER BY visible_at, message_id LIMIT $5"
		"  FOR UPDATE SKIP LOCKED))"
		" RETURNING " MSG_COLUMNS,
		5, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID}
	},
	[QP_DELETE] = {
		"DELETE FROM %1$s WHERE message_id = $1 AND receipt = $2",
		2, {INT8OID, INT8OID}
	},

	/*
	 * Pairs are matched loosely here (any id, any receipt of the batch) and
	 * exactly in C, which checks each returned row's receipt against the one
	 * given for its id and fails the whole call on a mismatch.
	 */
	[QP_DELETE_BATCH] = {
		"DELETE FROM %1$s WHERE message_id = ANY ($1) AND receipt = ANY ($2)"
		" RETURNING message_id, receipt",
		2, {INT8ARRAYOID, INT8ARRAYOID}
	},
	[QP_CHANGE_VIS] = {
		"UPDATE %1$s SET visible_at = $3 WHERE message_id = $1 AND receipt = $2",
		3, {INT8OID, INT8OID, TIMESTAMPTZOID}
	},
	[QP_CHANGE_VIS_BATCH] = {
		"UPDATE %1$s SET visible_at = $3"
		" WHERE message_id = ANY ($1) AND receipt = ANY ($2)"
		" RETURNING message_id, receipt",
		3, {INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID}
	},
	[QP_RECEIPTS_OF] = {
		"SELECT message_id, receipt FROM %1$s WHERE message_id = ANY ($1)",
		1, {INT8ARRAYOID}
	},
	[QP_PEEK] = {
		"SELECT " MSG_COLUMNS " FROM %1$s WHERE sent_at > $1"
		" ORDER BY visible_at, message_id LIMIT $2",
		2, {TIMESTAMPTZOID, INT4OID}
	},
};

/* The kept plan of one statement of a queue, prepared on first use. */
SPIPlanPtr
queue_plan(QueueMeta *q, QueuePlanKind kind)
{
	const PlanSpec *spec = &plan_specs[kind];
	char	   *table;
	char	   *sql;
	SPIPlanPtr	plan;

	if (q->plans[kind] != NULL)
		return q->plans[kind];

	table = psprintf("queue_data.q" INT64_FORMAT, q->id);
	sql = psprintf(spec->sql, table);
	plan = SPI_prepare(sql, spec->nargs, (Oid *) spec->argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s",
			 sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	pfree(sql);
	pfree(table);
	q->plans[kind] = plan;
	return plan;
}

/* Forget a queue's plans, when its cache entry is rebuilt. */
void
queue_release_plans(QueueMeta *q)
{
	for (int i = 0; i < QP_NUM_PLANS; i++)
	{
		if (q->plans[i] != NULL)
			SPI_freeplan(q->plans[i]);
		q->plans[i] = NULL;
	}
}
