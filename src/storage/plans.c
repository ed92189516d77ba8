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

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"

typedef struct PlanSpec
{
	const char *sql;			/* placeholders: see plan_text */
	int			nargs;
	Oid			argtypes[QUEUE_FAIR_ARGS];
	bool		levels;			/* a form that reads the priorities' index too ({+}) */
} PlanSpec;

#define MSG_COLUMNS \
	"message_id, body, attributes, message_group_id, deduplication_id," \
	" sequence_number, receive_count, sent_at, first_received_at, visible_at{P}"

/*
 * The visible_at index holds only the messages whose priority is null
 * (1.13: a message stored with a priority is in the priorities' index
 * instead, so a lease writes two index entries either way).  A statement
 * that reads a queue in visible_at order reads that index ({N.m}); its
 * form for a queue with priorities ({+} ... {-}: a spec with levels) also
 * reads each level of the priorities' index, and merges.
 *
 * VISIBLE_ORDER: at most lim rows (cols of alias m, which include its
 * visible_at and message_id) meeting cond, in (visible_at, message_id)
 * order.
 */
#define VISIBLE_ORDER(cols, cond, lim) \
	"{+}SELECT v.* FROM ((SELECT " cols " FROM {q} m WHERE {S.m}{N.m}" cond \
	"   ORDER BY m.visible_at, m.message_id LIMIT " lim ")" \
	"  UNION ALL (SELECT x.* FROM pg_catalog.unnest(" QUEUE_ALL_LEVELS ") AS l(p)" \
	"   CROSS JOIN LATERAL (SELECT " cols " FROM {q} m" \
	"    WHERE {S.m}m.priority = l.p AND " cond \
	"    ORDER BY m.priority, m.visible_at, m.message_id LIMIT " lim ") x)) v" \
	" ORDER BY v.visible_at, v.message_id LIMIT " lim "{-}" \
	"{!}SELECT " cols " FROM {q} m WHERE {S.m}{N.m}" cond \
	" ORDER BY m.visible_at, m.message_id LIMIT " lim "{-}"

/*
 * The lease of a FIFO receive of a queue with a dead-letter queue, after
 * its groups g: as QP_FIFO_RECEIVE, but candidates received $8 times are
 * not leased; they are returned flagged (column 11) for the caller to move.
 * $9: messages this receive call already delivered (a later statement of
 * the same call must not hand them out again, even with a zero lease).
 */
#define FIFO_DLQ_LEASE \
	" c AS MATERIALIZED (" \
	"  SELECT x.message_id, x.receive_count, g.message_group_id," \
	"   row_number() OVER (ORDER BY g.head_seq, x.message_id) AS ord" \
	"  FROM g CROSS JOIN LATERAL (" \
	"   SELECT m.message_id, m.receive_count FROM {q} m" \
	"   WHERE {S.m}m.message_group_id = g.message_group_id" \
	"    AND m.message_id >= g.head_seq" \
	"    AND m.visible_at <= $1 AND m.sent_at > $4" \
	"    AND m.message_id <> ALL ($9)" \
	"   ORDER BY m.message_id LIMIT $5) x" \
	"  ORDER BY g.head_seq, x.message_id LIMIT $5)," \
	" u AS (UPDATE {q} m SET visible_at = $2, receipt = $3," \
	"  receive_count = m.receive_count + 1," \
	"  first_received_at = coalesce(m.first_received_at, $1)" \
	"  WHERE {S.m}m.message_id = ANY (ARRAY(SELECT message_id FROM c WHERE receive_count < $8))" \
	"  RETURNING " MSG_COLUMNS ")," \
	" gl AS (UPDATE {g} g SET available_at = $2, leased_upto = l.upto" \
	"  FROM (SELECT message_group_id, max(message_id) AS upto FROM u GROUP BY 1) l" \
	"  WHERE {S.g}g.message_group_id = l.message_group_id)" \
	" SELECT * FROM (SELECT u.*, false, c.ord FROM u JOIN c USING (message_id)" \
	"  UNION ALL SELECT c.message_id, NULL, NULL, c.message_group_id, NULL, NULL," \
	"   NULL, NULL, NULL, NULL, NULL, true, c.ord FROM c WHERE c.receive_count >= $8) z" \
	" ORDER BY ord"

/*
 * (The statements below that read one tenant's messages order them by
 * message_group_id first, which only the tenants' index gives without a
 * sort: a generic plan made while the table's statistics know one group
 * would otherwise walk (store_id, visible_at) and filter by group.)
 *
 * The group ids of a queue's messages, t(g, i), in order, one index
 * descent each (a skip scan), at most limit (a parameter) of them; the
 * last row's g is null when they ran out.
 */
#define TENANTS_OF(limit) \
	"WITH RECURSIVE t(g, i) AS (" \
	"  (SELECT m.message_group_id, 1 FROM {q} m" \
	"   WHERE {S.m}m.message_group_id IS NOT NULL ORDER BY m.message_group_id LIMIT 1)" \
	"  UNION ALL" \
	"  SELECT (SELECT m.message_group_id FROM {q} m" \
	"   WHERE {S.m}m.message_group_id > t.g ORDER BY m.message_group_id LIMIT 1), t.i + 1" \
	"  FROM t WHERE t.g IS NOT NULL AND t.i < " limit ")"

/*
 * A tenant's messages in flight, counted up to limit, in its part of the
 * tenants' index; and those of the messages without a group id, in the
 * (store_id, visible_at) index.  $1 is now in every statement using them.
 */
#define IN_FLIGHT_OF(group, limit) \
	"(SELECT count(*) FROM (SELECT FROM {q} m WHERE {S.m}m.message_group_id = " group \
	"  AND m.visible_at > $1 AND m.receive_count > 0" \
	"  ORDER BY m.message_group_id, m.visible_at LIMIT " limit ") z)"
#define IN_FLIGHT_UNGROUPED(limit) \
	"(SELECT count(*) FROM (" \
	VISIBLE_ORDER("m.visible_at, m.message_id", \
				  "m.visible_at > $1 AND m.message_group_id IS NULL AND m.receive_count > 0", \
				  limit) ") z)"

/*
 * A fair lease's share of the tenant without a group id ($10 messages,
 * within the bound $14), when the gate (a parameter) is on: first when
 * chosen ($9), last when a spare ($15).  See QP_FAIR_RECEIVE.
 */
#define FAIR_NULL_QUOTA "greatest(0, least($10, coalesce($6 - f.n, $10)))"
#define FAIR_NULL_COND \
	" m.visible_at <= least($1, $14) AND m.sent_at > $4" \
	"    AND m.message_group_id IS NULL AND m.message_id <> ALL ($12)"
#define FAIR_NULL_LEVELS(levels) \
	"   SELECT y.* FROM pg_catalog.unnest('" levels "'::pg_catalog.int2[]) AS l(p)" \
	"   CROSS JOIN LATERAL (SELECT m.message_id, m.receive_count FROM {q} m" \
	"    WHERE {S.m}m.priority = l.p AND" FAIR_NULL_COND \
	"    ORDER BY m.priority, m.visible_at, m.message_id" \
	"    LIMIT " FAIR_NULL_QUOTA " FOR UPDATE SKIP LOCKED) y"
#define FAIR_NULL_LEASE(gate) \
	"SELECT x.message_id, x.receive_count, NULL::text AS message_group_id" \
	"  FROM (SELECT CASE WHEN $6 IS NULL THEN 0 ELSE " IN_FLIGHT_UNGROUPED("$13") " END AS n) f" \
	"  CROSS JOIN LATERAL (" \
	"{+}" FAIR_NULL_LEVELS("{9,8,7,6,5}") " UNION ALL{-}" \
	"   SELECT z.* FROM (SELECT m.message_id, m.receive_count FROM {q} m" \
	"    WHERE {S.m}{N.m}" FAIR_NULL_COND \
	"    ORDER BY m.visible_at, m.message_id" \
	"    LIMIT " FAIR_NULL_QUOTA " FOR UPDATE SKIP LOCKED) z" \
	"{+} UNION ALL" FAIR_NULL_LEVELS("{4,3,2,1,0}") "{-}" \
	"  LIMIT " FAIR_NULL_QUOTA ") x" \
	"  WHERE " gate

#define FAIR_RECEIVE_SPEC(levels) { \
		"WITH c AS MATERIALIZED (" \
		"  " FAIR_NULL_LEASE("$9") \
		"  UNION ALL" \
		"  SELECT x.message_id, x.receive_count, x.message_group_id" \
		"  FROM unnest($7, $8) AS t(g, quota)" \
		"  CROSS JOIN LATERAL (SELECT CASE WHEN $6 IS NULL THEN 0" \
		"   ELSE " IN_FLIGHT_OF("t.g", "$13") " END AS n) f" \
		"  CROSS JOIN LATERAL (SELECT m.message_id, m.receive_count, m.message_group_id" \
		"   FROM {q} m WHERE {S.m}m.message_group_id = t.g AND m.visible_at <= $1" \
		"    AND m.sent_at > $4 AND m.message_id <> ALL ($12)" \
		"   ORDER BY m.message_group_id, {O}m.visible_at, m.message_id" \
		"   LIMIT greatest(0, least(t.quota, coalesce($6 - f.n, t.quota))) FOR UPDATE SKIP LOCKED) x" \
		"  UNION ALL" \
		"  " FAIR_NULL_LEASE("$15") \
		"  LIMIT $5)," \
		" u AS (UPDATE {q} m SET visible_at = $2, receipt = $3," \
		"  receive_count = m.receive_count + 1," \
		"  first_received_at = coalesce(m.first_received_at, $1)" \
		"  WHERE {S.m}m.message_id = ANY (ARRAY(SELECT message_id FROM c" \
		"   WHERE $11 = 0 OR receive_count < $11))" \
		"  RETURNING " MSG_COLUMNS ")" \
		" SELECT u.*, false FROM u" \
		" UNION ALL SELECT c.message_id, NULL, NULL, c.message_group_id, NULL, NULL," \
		"  NULL, NULL, NULL, NULL, NULL, true FROM c WHERE $11 > 0 AND c.receive_count >= $11", \
		15, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID, INT4OID, \
			TEXTARRAYOID, INT4ARRAYOID, BOOLOID, INT4OID, INT4OID, INT8ARRAYOID, INT4OID, \
		TIMESTAMPTZOID, BOOLOID}, levels \
}

/*
 * The candidates of a lease of a queue with priorities: each level's
 * visible messages, 9 first, oldest first within one, read level by level
 * from the partial index of the prioritised messages (store_id, priority,
 * visible_at, message_id), each under SKIP LOCKED and from that level's
 * ready bound (lbounds: a timestamptz[] indexed by priority + 1,
 * common/counts.c); the statement's LIMIT stops the walk at the batch.
 * Priority 4 is also the messages whose column is null (sent before the
 * queue had a message of another priority, or by a send that raced the
 * first: fifo/priority.c): while a queue may have some (the _NULLS
 * forms), they are looked for first at level 4 (they are the older), in
 * the visible_at index, which holds only them, from the queue's ready
 * bound.
 * extra: a condition on m; bound: the queue's ready bound's parameter.
 */
#define PRIO_LEVEL(levels, extra, lbounds) \
	"  SELECT x.* FROM pg_catalog.unnest('" levels "'::pg_catalog.int2[]) AS l(p)" \
	"  CROSS JOIN LATERAL (SELECT m.message_id, m.receive_count, m.message_group_id FROM {q} m" \
	"   WHERE {S.m}m.priority = l.p AND m.visible_at <= $1" \
	"    AND m.visible_at >= (" lbounds ")[l.p + 1] AND m.sent_at > $4" extra \
	"   ORDER BY m.priority, m.visible_at, m.message_id LIMIT $5 FOR UPDATE SKIP LOCKED) x"
#define PRIO_NULL_LEVEL(extra, bound) \
	"  SELECT z.* FROM (SELECT m.message_id, m.receive_count, m.message_group_id FROM {q} m" \
	"   WHERE {S.m}m.priority IS NULL AND m.visible_at <= $1 AND m.visible_at >= " bound \
	"    AND m.sent_at > $4" extra \
	"   ORDER BY m.visible_at, m.message_id LIMIT $5 FOR UPDATE SKIP LOCKED) z"
#define PRIO_CANDIDATES(extra, bound, lbounds) \
	PRIO_LEVEL("{9,8,7,6,5,4,3,2,1,0}", extra, lbounds)
#define PRIO_CANDIDATES_NULLS(extra, bound, lbounds) \
	PRIO_LEVEL("{9,8,7,6,5}", extra, lbounds) \
	"  UNION ALL" PRIO_NULL_LEVEL(extra, bound) \
	"  UNION ALL" PRIO_LEVEL("{4,3,2,1,0}", extra, lbounds)

/* A lease by priority (QP_RECEIVE_PRIO and its _NULLS form). */
#define RECEIVE_PRIO_SPEC(candidates) { \
	"WITH c AS MATERIALIZED (" candidates("", "$6", "$7") "  LIMIT $5)" \
	" UPDATE {q} m SET visible_at = $2, receipt = $3," \
	" receive_count = m.receive_count + 1," \
	" first_received_at = coalesce(m.first_received_at, $1)" \
	" WHERE {S.m}m.message_id = ANY (ARRAY(SELECT message_id FROM c))" \
	" RETURNING " MSG_COLUMNS, \
	7, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID, \
	TIMESTAMPTZOID, TIMESTAMPTZARRAYOID} \
}

/*
 * The rest of a lease with a dead-letter queue after its candidates c
 * (QP_RECEIVE_DLQ and the forms by priority): those received fewer than
 * $6 times are leased, the others come back flagged for the move.
 */
#define DLQ_LEASE_ROWS \
	" u AS (UPDATE {q} m SET visible_at = $2, receipt = $3," \
	"  receive_count = m.receive_count + 1," \
	"  first_received_at = coalesce(m.first_received_at, $1)" \
	"  WHERE {S.m}m.message_id = ANY (ARRAY(SELECT message_id FROM c WHERE receive_count < $6))" \
	"  RETURNING " MSG_COLUMNS ")" \
	" SELECT u.*, false FROM u" \
	" UNION ALL SELECT c.message_id, NULL, NULL, c.message_group_id, NULL, NULL," \
	"  NULL, NULL, NULL, NULL, NULL, true FROM c WHERE c.receive_count >= $6"

/* ... with a dead-letter queue (QP_RECEIVE_DLQ_PRIO and its _NULLS form). */
#define RECEIVE_DLQ_PRIO_SPEC(candidates) { \
	"WITH c AS MATERIALIZED (" \
	candidates(" AND m.message_id <> ALL ($7)", "$8", "$9") "  LIMIT $5)," \
	DLQ_LEASE_ROWS, \
	9, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID, INT4OID, \
	INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZARRAYOID} \
}

/*
 * The forms of the statements below without priorities (levels false:
 * the visible_at index, the messages stored without one) and with them
 * (levels true: each level's messages too, VISIBLE_ORDER's {+} part).
 */
#define FAIR_WINDOW_SPEC(levels) { \
	"WITH w AS MATERIALIZED (" \
	VISIBLE_ORDER("m.message_group_id, m.visible_at, m.message_id", \
				  "m.visible_at <= $1 AND m.sent_at > $2", "$3") ")" \
	" SELECT w.message_group_id, w.visible_at, w.message_id, NULL::bigint FROM w" \
	" UNION ALL" \
	" SELECT d.g, NULL, NULL, " IN_FLIGHT_OF("d.g", "$4") \
	" FROM (SELECT DISTINCT w.message_group_id AS g FROM w WHERE w.message_group_id IS NOT NULL) d" \
	" UNION ALL" \
	" SELECT NULL, NULL, NULL, " IN_FLIGHT_UNGROUPED("$4") \
	" WHERE EXISTS (SELECT FROM w WHERE w.message_group_id IS NULL)", \
	4, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, INT4OID}, levels \
}
#define FAIR_TENANTS_SPEC(levels) { \
	TENANTS_OF("$5") \
	" SELECT t.g, f.n, h.visible_at, h.message_id, NULL::timestamptz FROM t" \
	" CROSS JOIN LATERAL (SELECT m.visible_at, m.message_id FROM {q} m" \
	"  WHERE {S.m}m.message_group_id = t.g AND m.visible_at <= $1 AND m.sent_at > $2" \
	"  ORDER BY m.message_group_id, m.visible_at, m.message_id LIMIT 1) h" \
	" CROSS JOIN LATERAL (SELECT " IN_FLIGHT_OF("t.g", "$4") " AS n) f" \
	" WHERE t.g IS NOT NULL AND ($6 IS NULL OR f.n < $6)" \
	" UNION ALL" \
	" SELECT NULL, f.n, h.visible_at, h.message_id, w.bound" \
	" FROM (SELECT CASE WHEN $8 THEN $1 ELSE max(x.visible_at) END AS bound" \
	"  FROM (" VISIBLE_ORDER("m.visible_at, m.message_id", \
							 "m.visible_at <= $1 AND m.sent_at > $2", "200") ") x) w" \
	" CROSS JOIN LATERAL (" \
	VISIBLE_ORDER("m.visible_at, m.message_id", \
				  "m.visible_at <= w.bound AND m.sent_at > $2 AND m.message_group_id IS NULL", \
				  "1") ") h" \
	" CROSS JOIN LATERAL (SELECT " IN_FLIGHT_UNGROUPED("$4") " AS n) f" \
	" WHERE $7 AND ($6 IS NULL OR f.n < $6)" \
	" ORDER BY 2, 3, 4 LIMIT $3", \
	8, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, INT4OID, INT4OID, INT4OID, BOOLOID, BOOLOID}, \
	levels \
}
#define GROUP_STATS_SPEC(levels) { \
	TENANTS_OF("$2") \
	" SELECT t.g, v.n, l.in_flight, l.delayed, least(v.oldest, l.oldest) FROM t" \
	" CROSS JOIN LATERAL (SELECT count(*) AS n, min(x.sent_at) AS oldest FROM (" \
	"  SELECT m.sent_at FROM {q} m WHERE {S.m}m.message_group_id = t.g" \
	"   AND m.visible_at <= $1 AND m.sent_at > $3 ORDER BY m.message_group_id, m.visible_at LIMIT 10001) x) v" \
	" CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE x.receive_count > 0) AS in_flight," \
	"  count(*) FILTER (WHERE x.receive_count = 0) AS delayed, min(x.sent_at) AS oldest FROM (" \
	"  SELECT m.sent_at, m.receive_count FROM {q} m WHERE {S.m}m.message_group_id = t.g" \
	"   AND m.visible_at > $1 AND m.sent_at > $3 ORDER BY m.message_group_id, m.visible_at LIMIT 10001) x) l" \
	" WHERE t.g IS NOT NULL AND v.n + l.in_flight + l.delayed > 0" \
	" UNION ALL" \
	" SELECT NULL, count(*) FILTER (WHERE x.visible_at <= $1)," \
	"  count(*) FILTER (WHERE x.visible_at > $1 AND x.receive_count > 0)," \
	"  count(*) FILTER (WHERE x.visible_at > $1 AND x.receive_count = 0), min(x.sent_at)" \
	" FROM (" VISIBLE_ORDER("m.visible_at, m.receive_count, m.sent_at, m.message_group_id, m.message_id", \
						   "m.sent_at > $3", "10001") ") x" \
	" WHERE x.message_group_id IS NULL HAVING count(*) > 0", \
	3, {TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID}, levels \
}

#define DLQ_SWEEP_COND \
	"m.visible_at > $1 AND m.visible_at <= $2 AND m.receive_count >= $3 AND m.sent_at > $4"

static const PlanSpec plan_specs[QP_NUM_PLANS] = {
	/*
	 * The lease.  The inner scan walks the (visible_at, message_id) index
	 * from the queue's ready bound ($6, common/counts.c: no message is
	 * ready below it, so the entries of messages received and deleted that
	 * a held snapshot keeps are not walked) to now, so in-flight and
	 * delayed messages (visible_at in the future) are never visited; SKIP
	 * LOCKED passes over rows another receive is taking.  "= ANY (ARRAY(...))" keeps the outer update on the
	 * primary key whatever the planner thinks of the table's size.
	 */
	[QP_RECEIVE] = {
		"UPDATE {q} m SET visible_at = $2, receipt = $3,"
		" receive_count = m.receive_count + 1,"
		" first_received_at = coalesce(m.first_received_at, $1)"
		" WHERE {S.m}m.message_id = ANY (ARRAY("
		"  SELECT x.message_id FROM {q} x"
		"  WHERE {S.x}{N.x}x.visible_at <= $1 AND x.visible_at >= $6 AND x.sent_at > $4"
		"  ORDER BY x.visible_at, x.message_id LIMIT $5"
		"  FOR UPDATE SKIP LOCKED))"
		" RETURNING " MSG_COLUMNS,
		6, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID,
		TIMESTAMPTZOID}
	},
	[QP_DELETE] = {
		"DELETE FROM {q} m WHERE {S.m}m.message_id = $1 AND m.receipt = $2",
		2, {INT8OID, INT8OID}
	},

	/*
	 * Pairs are matched loosely here (any id, any receipt of the batch) and
	 * exactly in C, which checks each returned row's receipt against the one
	 * given for its id and fails the whole call on a mismatch.
	 */
	/*
	 * As QP_DELETE_BATCH, but only a lease still running ($4: now; $3 is
	 * unused): SQS refuses a FIFO message's delete once its visibility
	 * timeout passed (settle.c, for the SQS endpoint).
	 */
	[QP_DELETE_LIVE_BATCH] = {
		"DELETE FROM {q} m WHERE {S.m}m.message_id = ANY ($1) AND m.receipt = ANY ($2)"
		" AND m.visible_at > $4"
		" RETURNING m.message_id, m.receipt, m.message_group_id",
		4, {INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[QP_DELETE_BATCH] = {
		"DELETE FROM {q} m WHERE {S.m}m.message_id = ANY ($1) AND m.receipt = ANY ($2)"
		" RETURNING m.message_id, m.receipt, m.message_group_id",
		2, {INT8ARRAYOID, INT8ARRAYOID}
	},

	/*
	 * Only a lease still running ($4: now) is changed; one whose
	 * visible_at has passed has ended, and settle.c tells that miss from
	 * a stale receipt.
	 */
	[QP_CHANGE_VIS] = {
		"UPDATE {q} m SET visible_at = $3"
		" WHERE {S.m}m.message_id = $1 AND m.receipt = $2 AND m.visible_at > $4",
		4, {INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[QP_CHANGE_VIS_BATCH] = {
		"UPDATE {q} m SET visible_at = $3"
		" WHERE {S.m}m.message_id = ANY ($1) AND m.receipt = ANY ($2) AND m.visible_at > $4"
		" RETURNING m.message_id, m.receipt, m.message_group_id",
		4, {INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},

	[QP_RECEIPTS_OF] = {
		"SELECT m.message_id, m.receipt FROM {q} m WHERE {S.m}m.message_id = ANY ($1)",
		1, {INT8ARRAYOID}
	},
	/*
	 * Claim deduplication ids that insert.c could not claim directly: a
	 * new id, or one whose window has passed (swept or not), takes the
	 * message id drawn for it ($5); a live one returns nothing.  A
	 * concurrent claim of the same id waits here for the first to commit
	 * or roll back.
	 */
	[QP_DEDUP_CLAIM] = {
		"INSERT INTO {d} AS d ({Q,}scope_key, deduplication_id, message_id, accepted_at)"
		" SELECT {Q$}u.k, u.d, u.id, $1"
		" FROM unnest($3, $4, $5) AS u(k, d, id)"
		" ON CONFLICT ({Q,}scope_key, deduplication_id) DO UPDATE"
		" SET message_id = excluded.message_id, accepted_at = excluded.accepted_at"
		" WHERE d.accepted_at <= $2"
		" RETURNING d.scope_key, d.deduplication_id, d.message_id",
		5, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID, INT8ARRAYOID}
	},
	[QP_DEDUP_CLAIM_ONE] = {
		"INSERT INTO {d} AS d ({Q,}scope_key, deduplication_id, message_id, accepted_at)"
		" VALUES ({Q$}$3, $4, $5, $1)"
		" ON CONFLICT ({Q,}scope_key, deduplication_id) DO UPDATE"
		" SET message_id = excluded.message_id, accepted_at = excluded.accepted_at"
		" WHERE d.accepted_at <= $2"
		" RETURNING d.scope_key, d.deduplication_id, d.message_id",
		5, {TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT8OID}
	},
	[QP_DEDUP_ORIGINALS] = {
		"SELECT d.scope_key, d.deduplication_id, d.message_id FROM {d} d"
		" JOIN unnest($1, $2) AS u(k, i)"
		"  ON {Q.d}d.scope_key = u.k AND d.deduplication_id = u.i",
		2, {TEXTARRAYOID, TEXTARRAYOID}
	},

	/*
	 * Rows of groups a send found without one (send.c), headed by the
	 * first message it put there.
	 */
	[QP_GROUP_NEW] = {
		"INSERT INTO {g} ({S,}message_group_id, head_seq, available_at)"
		" SELECT {S$}u.gid, u.head, u.available_at FROM unnest($1, $2, $3) AS u(gid, head, available_at)",
		3, {TEXTARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID}
	},
	[QP_GROUP_NEW_ONE] = {
		"INSERT INTO {g} ({S,}message_group_id, head_seq, available_at) VALUES ({S$}$1, $2, $3)",
		3, {TEXTOID, INT8OID, TIMESTAMPTZOID}
	},
	/*
	 * After messages were moved into FIFO groups (a dead-letter move or a
	 * redrive), under the groups' senders' locks and with the latest
	 * snapshot: a group without a row gets one, headed by its first
	 * message; moved messages keep their ids, so one may come before the
	 * head of a group that has a row, and the row is updated to say so.
	 * NOT EXISTS sees a row first, so ON CONFLICT (which would wait for a
	 * receiver or deleter updating it) is only a guard.
	 */
	[QP_GROUP_ADD_MOVED] = {
		"WITH h AS (SELECT gg.gid, f.message_id, f.visible_at FROM unnest($1) AS gg(gid)"
		"  CROSS JOIN LATERAL (SELECT m.message_id, m.visible_at FROM {q} m"
		"   WHERE {S.m}m.message_group_id = gg.gid ORDER BY m.message_id LIMIT 1) f),"
		" u AS (UPDATE {g} g SET head_seq = h.message_id FROM h"
		"  WHERE {S.g}g.message_group_id = h.gid AND h.message_id < g.head_seq)"
		" INSERT INTO {g} ({S,}message_group_id, head_seq, available_at)"
		" SELECT {S$}h.gid, h.message_id, h.visible_at FROM h"
		" WHERE NOT EXISTS (SELECT FROM {g} x WHERE {S.x}x.message_group_id = h.gid)"
		" ON CONFLICT ({S,}message_group_id) DO NOTHING",
		1, {TEXTARRAYOID}
	},

	/*
	 * What queue_fifo_refresh_groups (groups.c) found, read from the
	 * messages in C: the new head and next delivery time of groups left
	 * non-empty, and the groups left empty.
	 */
	[QP_GROUP_SET] = {
		"UPDATE {g} g SET head_seq = u.head, available_at = u.available_at"
		" FROM unnest($1, $2, $3) AS u(gid, head, available_at)"
		" WHERE {S.g}g.message_group_id = u.gid",
		3, {TEXTARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID}
	},
	[QP_GROUP_SET_ONE] = {
		"UPDATE {g} g SET head_seq = $2, available_at = $3 WHERE {S.g}g.message_group_id = $1",
		3, {TEXTOID, INT8OID, TIMESTAMPTZOID}
	},
	[QP_GROUP_DROP] = {
		"DELETE FROM {g} g WHERE {S.g}g.message_group_id = ANY ($1)",
		1, {TEXTARRAYOID}
	},
	/*
	 * The first group head at or above $1, the FIFO form of the ready
	 * bound (counts.c): the receive's walk of g's head index starts there.
	 */
	[QP_GROUP_MIN_HEAD] = {
		"SELECT g.head_seq FROM {g} g WHERE {S.g}g.head_seq >= $1"
		" ORDER BY g.head_seq LIMIT 1",
		1, {INT8OID}
	},

	/*
	 * The FIFO lease.  Walk the available groups oldest head first (at
	 * most $6; null: no limit), skipping groups someone holds and those in
	 * $7, and from each take its visible messages in order, until
	 * max_messages ($5): one group gives as many as it can before the next
	 * fills the batch.  The walk is a nested loop pulled by the LIMIT, so
	 * a group is locked only when the batch still needs messages.
	 *
	 * A group whose messages have all expired (sent_at + retention passed,
	 * $4) but are not swept yet gives nothing, and must not stop the walk:
	 * correctness never waits for the worker.  With no group limit (a
	 * receive outside a transaction block) the walk goes on past it; with
	 * one (inside a block, one group per statement) only a group with a
	 * message to give is taken, which the EXISTS checks.  It is evaluated
	 * only then, so the usual receive pays nothing for it.
	 *
	 * The groups delivered from are blocked until the leases end: those of
	 * the rows u leased, not of c, since a candidate read from the
	 * statement's snapshot may have been deleted since (the group row
	 * locked is its newest version, the messages are not).  Rows come back
	 * in no order: receive.c puts them in delivery order, which costs less
	 * there than a window, a join and a sort here.  (A group locked but not
	 * needed stays locked until the receiving transaction ends, which is
	 * why a receive inside a transaction block takes one group per
	 * statement: receive.c.)
	 */
	[QP_FIFO_RECEIVE] = {
		"WITH c AS MATERIALIZED ("
		"  SELECT x.message_id, g.message_group_id"
		"  FROM (SELECT g.message_group_id, g.head_seq FROM {g} g"
		"   WHERE {S.g}g.head_seq >= $8 AND g.available_at <= $1"
		"    AND g.message_group_id <> ALL ($7)"
		"    AND ($6 IS NULL OR EXISTS (SELECT FROM {q} m"
		"     WHERE {S.m}m.message_group_id = g.message_group_id"
		"      AND m.message_id >= g.head_seq"
		"      AND m.visible_at <= $1 AND m.sent_at > $4))"
		"   ORDER BY g.head_seq LIMIT $6 FOR UPDATE SKIP LOCKED) g"
		"  CROSS JOIN LATERAL ("
		"   SELECT m.message_id FROM {q} m"
		"   WHERE {S.m}m.message_group_id = g.message_group_id"
		"    AND m.message_id >= g.head_seq"
		"    AND m.visible_at <= $1 AND m.sent_at > $4"
		"   ORDER BY m.message_id LIMIT $5) x"
		"  LIMIT $5),"
		" u AS (UPDATE {q} m SET visible_at = $2, receipt = $3,"
		"  receive_count = m.receive_count + 1,"
		"  first_received_at = coalesce(m.first_received_at, $1)"
		"  WHERE {S.m}m.message_id = ANY (ARRAY(SELECT message_id FROM c))"
		"  RETURNING " MSG_COLUMNS "),"
		" gl AS (UPDATE {g} g SET available_at = $2, leased_upto = l.upto"
		"  FROM (SELECT message_group_id, max(message_id) AS upto FROM u GROUP BY 1) l"
		"  WHERE {S.g}g.message_group_id = l.message_group_id)"
		" SELECT * FROM u",
		8, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID,
		INT4OID, TEXTARRAYOID, INT8OID}
	},

	/* Receive attempts: what an attempt returned, and whether it still holds. */
	[QP_ATTEMPT_GET] = {
		"SELECT a.nonce, a.message_ids, a.visible_ats FROM {a} a"
		" WHERE {Q.a}a.receive_attempt_id = $1 AND a.received_at > $2 FOR UPDATE",
		2, {TEXTOID, TIMESTAMPTZOID}
	},
	[QP_ATTEMPT_MSGS] = {
		"SELECT " MSG_COLUMNS " FROM {q} m"
		" WHERE {S.m}m.message_id = ANY ($1) AND m.receipt = $2"
		" ORDER BY array_position($1, m.message_id)",
		2, {INT8ARRAYOID, INT8OID}
	},
	[QP_ATTEMPT_PUT] = {
		"INSERT INTO {a} ({Q,}receive_attempt_id, received_at, nonce, message_ids, visible_ats)"
		" VALUES ({Q$}$1, $2, $3, $4, $5)"
		" ON CONFLICT ({Q,}receive_attempt_id) DO UPDATE SET received_at = excluded.received_at,"
		" nonce = excluded.nonce, message_ids = excluded.message_ids,"
		" visible_ats = excluded.visible_ats",
		5, {TEXTOID, TIMESTAMPTZOID, INT8OID, INT8ARRAYOID, TIMESTAMPTZARRAYOID}
	},
	/*
	 * Receives of a queue with a dead-letter queue: candidates that were
	 * received max_receive_count times ($6) are not leased but returned
	 * flagged (column 11), still locked, for the caller to move.  $7: what
	 * this call already delivered (see FIFO_DLQ_LEASE); $8 the ready bound,
	 * as in QP_RECEIVE.
	 */
	[QP_RECEIVE_DLQ] = {
		"WITH c AS MATERIALIZED ("
		"  SELECT x.message_id, x.receive_count, x.message_group_id FROM {q} x"
		"  WHERE {S.x}{N.x}x.visible_at <= $1 AND x.visible_at >= $8 AND x.sent_at > $4"
		"   AND x.message_id <> ALL ($7)"
		"  ORDER BY x.visible_at, x.message_id LIMIT $5 FOR UPDATE SKIP LOCKED),"
		DLQ_LEASE_ROWS,
		8, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID, INT4OID,
		INT8ARRAYOID, TIMESTAMPTZOID}
	},

	/*
	 * The FIFO form: its groups (g) are read whole before the lease (c)
	 * sorts them, so $6 always limits them, and only groups that have a
	 * message to give count, as in QP_FIFO_RECEIVE: a group whose messages
	 * all expired unswept must not fill the limit.
	 */
	[QP_FIFO_RECEIVE_DLQ] = {
		"WITH g AS MATERIALIZED ("
		"  SELECT g.message_group_id, g.head_seq FROM {g} g"
		"  WHERE {S.g}g.head_seq >= $10 AND g.available_at <= $1"
		"   AND g.message_group_id <> ALL ($7)"
		"   AND EXISTS (SELECT FROM {q} m WHERE {S.m}m.message_group_id = g.message_group_id"
		"    AND m.message_id >= g.head_seq"
		"    AND m.visible_at <= $1 AND m.sent_at > $4 AND m.message_id <> ALL ($9))"
		"  ORDER BY g.head_seq LIMIT $6 FOR UPDATE SKIP LOCKED),"
		FIFO_DLQ_LEASE,
		10, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID,
		INT4OID, TEXTARRAYOID, INT4OID, INT8ARRAYOID, INT8OID}
	},

	/*
	 * After a receive moved a group's head to the dead-letter queue, the
	 * rest of that group may still fill the batch: the same lease over the
	 * groups in $7 (locked by this transaction already, and leased by it,
	 * so not "available"): their messages still visible come next in order.
	 */
	[QP_FIFO_RECEIVE_DLQ_MORE] = {
		"WITH g AS MATERIALIZED ("
		"  SELECT g.message_group_id, g.head_seq FROM {g} g"
		"  WHERE {S.g}g.message_group_id = ANY ($7) AND $6 > 0"
		"  ORDER BY g.head_seq FOR UPDATE),"
		FIFO_DLQ_LEASE,
		9, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT4OID,
		INT4OID, TEXTARRAYOID, INT4OID, INT8ARRAYOID}
	},

	/*
	 * The move to the dead-letter queue: same message id (so a redrive puts
	 * a FIFO message back where it was in its group), body, attributes,
	 * group, deduplication id, sent time and receive count; visible there
	 * at once; where it came from and why go into its attributes under
	 * "queue.dead_letter", and its source queue into source_queue_id.
	 * $6: the dead-letter queue's store (shared layout).
	 */
	[QP_MOVE_TO_DLQ] = {
		"WITH mv AS (DELETE FROM {q} m WHERE {S.m}m.message_id = ANY ($1) RETURNING m.*)"
		" INSERT INTO {L} ({L,}message_id, visible_at, sent_at, sequence_number,"
		"  first_received_at, receive_count, message_group_id, deduplication_id,"
		"  attributes, source_queue_id, body{C})"
		" SELECT {L$}mv.message_id, $2, mv.sent_at, CASE WHEN $4 THEN mv.message_id END,"
		"  mv.first_received_at, mv.receive_count, mv.message_group_id, mv.deduplication_id,"
		"  coalesce(mv.attributes, '{}') || jsonb_build_object('queue.dead_letter',"
		"   jsonb_build_object('source_queue', $3::text, 'reason', 'max_receive_count',"
		"    'receive_count', mv.receive_count, 'moved_at', $2)),"
		"  $5, mv.body{C} FROM mv ORDER BY mv.message_id{R}",
		6, {INT8ARRAYOID, TIMESTAMPTZOID, TEXTOID, BOOLOID, INT8OID, INT8OID}
	},

	/*
	 * Rolled-back receives counted (failed.c): $1 message ids (locked by
	 * the caller), $2 receives to add, $3 not visible before, $4 now.  A
	 * message whose retry delay has passed keeps its visible_at, so its
	 * place in the queue.
	 */
	[QP_FAILED_APPLY] = {
		"UPDATE {q} m SET receive_count = m.receive_count + f.n,"
		" visible_at = CASE WHEN f.not_before > $4"
		"  THEN greatest(m.visible_at, f.not_before) ELSE m.visible_at END,"
		" first_received_at = coalesce(m.first_received_at, $4)"
		" FROM unnest($1, $2, $3) AS f(id, n, not_before)"
		" WHERE {S.m}m.message_id = f.id"
		" RETURNING m.message_id, m.receive_count, m.message_group_id, m.visible_at",
		4, {INT8ARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID}
	},
	/*
	 * A receive's own leases that found rolled-back receives not yet
	 * written (failed.c): $1 ids, $2 receives to add to the row (those
	 * rolled back; less one for a lease given up), $3 new visible_at or
	 * null to keep the lease's.
	 */
	[QP_RECEIVE_FIXUP] = {
		"UPDATE {q} m SET receive_count = m.receive_count + f.d,"
		" visible_at = coalesce(f.v, m.visible_at)"
		" FROM unnest($1, $2, $3) AS f(id, d, v)"
		" WHERE {S.m}m.message_id = f.id",
		3, {INT8ARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID}
	},
	/* ... locking first the rows nobody holds (FIFO: groups, then rows) */
	[QP_FAILED_LOCK] = {
		"SELECT m.message_id FROM {q} m WHERE {S.m}m.message_id = ANY ($1)"
		" ORDER BY m.message_id FOR UPDATE SKIP LOCKED",
		1, {INT8ARRAYOID}
	},
	[QP_FAILED_LOCK_FIFO] = {
		"SELECT m.message_id FROM {q} m"
		" WHERE {S.m}m.message_id = ANY ($1) AND m.message_group_id = ANY (ARRAY("
		"  SELECT g.message_group_id FROM {g} g WHERE {S.g}g.message_group_id = ANY (ARRAY("
		"   SELECT y.message_group_id FROM {q} y WHERE {S.y}y.message_id = ANY ($1)))"
		"  ORDER BY g.message_group_id FOR UPDATE SKIP LOCKED))"
		" ORDER BY m.message_id FOR UPDATE SKIP LOCKED",
		1, {INT8ARRAYOID}
	},
	[QP_FAILED_EXISTING] = {
		"SELECT m.message_id FROM {q} m WHERE {S.m}m.message_id = ANY ($1)",
		1, {INT8ARRAYOID}
	},
	/* (both indexes always: a wait is no hot path; a waiter's queue may
	 * switch to priorities while it sleeps) */
	[QP_NEXT_VISIBLE] = {
		"SELECT v.visible_at FROM ("
		VISIBLE_ORDER("m.visible_at, m.message_id", "m.visible_at > $1", "1") ") v",
		1, {TIMESTAMPTZOID}, true
	},
	/* ... on a FIFO queue, when the next group opens (one row per group) */
	[QP_NEXT_AVAILABLE_FIFO] = {
		"SELECT min(g.available_at) FROM {g} g WHERE {S.g}g.available_at > $1",
		1, {TIMESTAMPTZOID}
	},
	/*
	 * A fair receive's first look (fair.c): the oldest $3 visible messages
	 * (column 4 null), then for each of their tenants its messages in
	 * flight, counted up to $4 (column 4), each in its own part of the
	 * tenants' index: the range of leases not yet over also holds the
	 * entries of every message leased and deleted within the visibility
	 * timeout, so one walk of it for the whole queue would read far more.
	 */
	[QP_FAIR_WINDOW] = FAIR_WINDOW_SPEC(false),
	[QP_FAIR_WINDOW_PRIO] = FAIR_WINDOW_SPEC(true),

	/*
	 * Fair receives (fair.c, DESIGN.md "Fair queues").  The candidate
	 * tenants: the groups with messages, found by skipping through the
	 * tenants' index (one descent a group, at most $5 groups), each with
	 * its head (oldest visible message) and its messages in flight
	 * (counted up to $4); with $7, messages without a group id too, as
	 * one tenant, if one is among the first 200 visible (the bound is the
	 * last of those, for the lease), or any visible with $8 (a queue with
	 * a rate limit per tenant, whose limited tenants may hold the head:
	 * the bound is now).  A tenant at the cap ($6) is left out.  Fewest in
	 * flight first, then oldest head; $3 of them.
	 */
	[QP_FAIR_TENANTS] = FAIR_TENANTS_SPEC(false),
	[QP_FAIR_TENANTS_PRIO] = FAIR_TENANTS_SPEC(true),

	/*
	 * The fair lease: from each tenant fair.c chose ($7), as many of its
	 * oldest visible messages as its quota ($8), which fair.c worked out
	 * so that the batch goes to the tenants with the fewest in flight,
	 * round and round, then spare tenants with quota $5, read only for
	 * what the chosen ones did not give (the LIMIT stops the reading);
	 * $9/$15 and $10: the tenant without a group id, chosen or spare,
	 * within the bound $14.  With a cap ($6) a tenant's messages in flight are
	 * counted again here (fair.c holds the capped tenants' locks, and this
	 * statement's snapshot is newer than the leases of their last holder),
	 * and it never gets more than its free places.  As QP_RECEIVE_DLQ,
	 * candidates received $11 times are not leased but returned flagged
	 * for the caller to move; $12: what this call already delivered.
	 */
	[QP_FAIR_RECEIVE] = FAIR_RECEIVE_SPEC(false),

	/*
	 * queue.group_stats: per tenant (at most $2 examined) its visible and
	 * not visible messages, each counted up to 10,001 (the index gives
	 * them in that split), and the oldest sent of those; messages without
	 * a group id as one more tenant, from the first 10,001 of the queue.
	 */
	[QP_GROUP_STATS] = GROUP_STATS_SPEC(false),
	[QP_GROUP_STATS_PRIO] = GROUP_STATS_SPEC(true),
	/* ... of a FIFO queue: a group's first 10,001 in order (those in flight lead) */
	[QP_GROUP_STATS_FIFO] = {
		TENANTS_OF("$2")
		" SELECT t.g, s.visible, s.in_flight, s.delayed, s.oldest FROM t"
		" CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE x.visible_at <= $1) AS visible,"
		"  count(*) FILTER (WHERE x.visible_at > $1 AND x.receive_count > 0) AS in_flight,"
		"  count(*) FILTER (WHERE x.visible_at > $1 AND x.receive_count = 0) AS delayed,"
		"  min(x.sent_at) AS oldest FROM ("
		"  SELECT m.visible_at, m.receive_count, m.sent_at FROM {q} m"
		"  WHERE {S.m}m.message_group_id = t.g AND m.sent_at > $3"
		"  ORDER BY m.message_group_id, m.message_id LIMIT 10001) x) s"
		" WHERE t.g IS NOT NULL AND s.visible + s.in_flight + s.delayed > 0",
		3, {TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID}
	},
	[QP_PEEK_FIFO] = {
		"SELECT " MSG_COLUMNS " FROM {q} m WHERE {S.m}m.sent_at > $1"
		" ORDER BY m.message_id LIMIT $2",
		2, {TIMESTAMPTZOID, INT4OID}
	},
	/* (peek reads both indexes always: it is no hot path) */
	[QP_PEEK] = {
		VISIBLE_ORDER(MSG_COLUMNS, "m.sent_at > $1", "$2"),
		2, {TIMESTAMPTZOID, INT4OID}, true
	},

	/*
	 * A queue with priorities (fair.c's queue_has_priorities): the lease,
	 * the lease with a dead-letter queue and the fair lease read the
	 * levels in order (PRIO_CANDIDATES; a fair lease sorts each tenant's
	 * visible messages by priority, {O}); peek shows them in that order.
	 * Parameters as their plain forms'.
	 */
	[QP_RECEIVE_PRIO] = RECEIVE_PRIO_SPEC(PRIO_CANDIDATES),
	[QP_RECEIVE_PRIO_NULLS] = RECEIVE_PRIO_SPEC(PRIO_CANDIDATES_NULLS),
	[QP_RECEIVE_DLQ_PRIO] = RECEIVE_DLQ_PRIO_SPEC(PRIO_CANDIDATES),
	[QP_RECEIVE_DLQ_PRIO_NULLS] = RECEIVE_DLQ_PRIO_SPEC(PRIO_CANDIDATES_NULLS),
	[QP_FAIR_RECEIVE_PRIO] = FAIR_RECEIVE_SPEC(true),
	[QP_PEEK_PRIO] = {
		"SELECT " MSG_COLUMNS " FROM {q} m WHERE {S.m}m.sent_at > $1"
		" ORDER BY coalesce(m.priority, 4) DESC, m.visible_at, m.message_id LIMIT $2",
		2, {TIMESTAMPTZOID, INT4OID}
	},

	/*
	 * The worker's dead-letter sweep of a standard queue (deadletter.c):
	 * the messages whose lease ran out in ($1, $2] after $3 receives, not
	 * expired ($4), at most 1,000, oldest lease first; only that range of
	 * each index is read, and rows someone holds are skipped.
	 */
	[QP_DLQ_SWEEP] = {
		"SELECT m.message_id, m.message_group_id FROM {q} m"
		" WHERE {S.m}m.message_id = ANY (ARRAY(SELECT w.message_id FROM ("
		VISIBLE_ORDER("m.message_id, m.visible_at", DLQ_SWEEP_COND, "1000") ") w))"
		"  AND " DLQ_SWEEP_COND
		" ORDER BY m.visible_at LIMIT 1000 FOR UPDATE SKIP LOCKED",
		4, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID}, true
	},

	[QP_PRIO_EXISTS] = {
		"SELECT EXISTS (SELECT FROM {q} m WHERE {S.m}m.priority IS NOT NULL)",
		0, {InvalidOid}
	},
};

/*
 * The plans of shared queues: one per statement kind and message table
 * (standard, FIFO), whatever the number of queues.
 */
static SPIPlanPtr shared_plans[2][2][QP_NUM_PLANS];	/* [fifo][prio_column] */

static SPIPlanPtr
prepare_plan(QueuePlanKind kind, const QueueMeta *q, bool dlq_shared, bool dlq_fifo)
{
	const PlanSpec *spec = &plan_specs[kind];
	Oid			types[QUEUE_FAIR_ARGS + 2];
	int			nargs = spec->nargs;
	char	   *sql;
	SPIPlanPtr	plan;

	memcpy(types, spec->argtypes, nargs * sizeof(Oid));
	if (q->shared)
	{
		types[nargs++] = INT8OID;
		types[nargs++] = INT8OID;
	}
	sql = queue_plan_text(spec->sql, spec->nargs, spec->levels, kind == QP_FAIR_RECEIVE_PRIO,
						  q, dlq_shared, dlq_fifo);
	plan = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s",
			 sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	pfree(sql);
	return plan;
}

/*
 * The kept plan of one statement of a queue, prepared on first use: per
 * queue for a dedicated queue (its own tables), per kind for a shared one.
 *
 * Plans are generic: the plan cache would otherwise keep re-planning with
 * each call's values whenever it estimates the generic plan dearer (it
 * does for the LIMIT $n statements), which costs more than the statement.
 * Every statement here is written so its generic plan walks an index.
 *
 * The dead-letter move names two queues' tables, so it is kept per queue
 * in either layout.
 */
SPIPlanPtr
queue_plan(QueueMeta *q, QueuePlanKind kind)
{
	SPIPlanPtr *slot;

	if (kind == QP_MOVE_TO_DLQ || !q->shared)
	{
		if (q->plans == NULL)
			q->plans = MemoryContextAllocZero(CacheMemoryContext,
											  QP_NUM_PLANS * sizeof(SPIPlanPtr));
		slot = &q->plans[kind];
	}
	else
		slot = &shared_plans[q->fifo ? 1 : 0][q->prio_column ? 1 : 0][kind];
	if (*slot == NULL)
		*slot = prepare_plan(kind, q, q->dlq_shared, q->dlq_fifo);
	return *slot;
}

/*
 * The arguments of a statement of q, with the layout's keys after the
 * statement's own (plan_text's $S and $Q).
 */
static void
plan_args(QueueMeta *q, QueuePlanKind kind, const Datum *args, const char *nulls,
		  Datum *all, char *allnulls)
{
	int			n = plan_specs[kind].nargs;

	memcpy(all, args, n * sizeof(Datum));
	if (nulls)
		memcpy(allnulls, nulls, n);
	else
		memset(allnulls, ' ', n);
	all[n] = Int64GetDatum(q->store_id);
	all[n + 1] = Int64GetDatum(q->id);
	allnulls[n] = allnulls[n + 1] = ' ';
	allnulls[n + 2] = '\0';
}

/* SPI_execute_plan of a statement of q. */
int
queue_exec(QueueMeta *q, QueuePlanKind kind, const Datum *args, const char *nulls,
		   bool read_only, long count)
{
	Datum		all[QUEUE_FAIR_ARGS + 2];
	char		allnulls[QUEUE_FAIR_ARGS + 3];
	SPIPlanPtr	plan = queue_plan(q, kind);

	if (!q->shared)
		return SPI_execute_plan(plan, (Datum *) args, nulls, read_only, count);
	plan_args(q, kind, args, nulls, all, allnulls);
	return SPI_execute_plan(plan, all, allnulls, read_only, count);
}

/* SPI_execute_snapshot of a statement of q. */
int
queue_exec_snapshot(QueueMeta *q, QueuePlanKind kind, const Datum *args,
					const char *nulls, Snapshot snapshot, bool read_only, long count)
{
	Datum		all[QUEUE_FAIR_ARGS + 2];
	char		allnulls[QUEUE_FAIR_ARGS + 3];
	SPIPlanPtr	plan = queue_plan(q, kind);

	if (!q->shared)
		return SPI_execute_snapshot(plan, (Datum *) args, nulls, snapshot,
									InvalidSnapshot, read_only, false, count);
	plan_args(q, kind, args, nulls, all, allnulls);
	return SPI_execute_snapshot(plan, all, allnulls, snapshot, InvalidSnapshot,
								read_only, false, count);
}

/* Forget a queue's plans, when its cache entry is rebuilt. */
void
queue_release_plans(QueueMeta *q)
{
	if (q->plans == NULL)
		return;
	for (int i = 0; i < QP_NUM_PLANS; i++)
	{
		if (q->plans[i] != NULL)
			SPI_freeplan(q->plans[i]);
		q->plans[i] = NULL;
	}
}
