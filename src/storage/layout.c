/*-------------------------------------------------------------------------
 *
 * layout.c
 *	  A queue's tables in its layout (DESIGN.md "Storage": shared tables
 *	  keyed by store or queue id, or a dedicated queue's own), and the text
 *	  of its statements for that layout: plans.c's placeholders expanded,
 *	  and the few statements built per queue outside plans.c (the worker's,
 *	  a redrive's).  Only numeric ids ever enter a statement's text.
 *
 * Calls: PostgreSQL only.  Called by: the files above it here, and those
 * building statements elsewhere (lease/deadletter.c, the worker).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "common/queue_common.h"
#include "storage/queue_storage.h"

/*
 * The shared layout's tables (DESIGN.md "Storage"), keyed by store id
 * (messages and groups) or queue id (deduplication ids and receive
 * attempts) first.
 */
const char *
queue_shared_table(char kind, bool fifo)
{
	switch (kind)
	{
		case 'q':
			return fifo ? "queue_data.fifo_messages" : "queue_data.messages";
		case 'g':
			return "queue_data.groups";
		case 'd':
			return "queue_data.dedup_ids";
		case 'a':
			return "queue_data.receive_attempts";
	}
	elog(ERROR, "unknown queue table kind %c", kind);
	return NULL;
}

/*
 * For the statements built per queue outside this file (the worker's, a
 * redrive's): one of q's tables in its layout, and the condition on its
 * key with alias (or none) then " AND ", empty for a dedicated queue.
 */
char *
queue_table_name(const QueueMeta *q, char kind)
{
	if (q->shared)
		return pstrdup(queue_shared_table(kind, q->fifo));
	return psprintf("queue_data.%c" INT64_FORMAT, kind, q->id);
}

/*
 * ... a statement whose one value is the first visible_at after the
 * expression after (NULL: none) of the messages of a standard queue's
 * table tbl meeting key (queue_key_cond's, without alias), one index
 * descent per part (prio_column: the table has the priorities' index).
 */
char *
queue_next_visible_text(const char *tbl, const char *key, bool prio_column,
						const char *after)
{
	if (!prio_column)
		return psprintf("SELECT min(visible_at) FROM %s WHERE %svisible_at > %s",
						tbl, key, after);
	return psprintf("SELECT LEAST("
					"(SELECT min(visible_at) FROM %s WHERE %spriority IS NULL"
					" AND visible_at > %s),"
					" (SELECT min(x.v) FROM pg_catalog.unnest(" QUEUE_ALL_LEVELS ") AS l(p)"
					"  CROSS JOIN LATERAL (SELECT min(visible_at) AS v FROM %s"
					"   WHERE %spriority = l.p AND visible_at > %s) x))",
					tbl, key, after, tbl, key, after);
}

char *
queue_key_cond(const QueueMeta *q, char kind, const char *alias)
{
	if (!q->shared)
		return "";
	return psprintf("%s%s%s = " INT64_FORMAT " AND ", alias ? alias : "", alias ? "." : "",
					(kind == 'd' || kind == 'a') ? "queue_id" : "store_id",
					(kind == 'd' || kind == 'a') ? q->id : q->store_id);
}

/*
 * The text of a statement for one layout.  Placeholders:
 *   {q} {g} {d} {a}  the queue's tables: queue_data.<kind><id> when the
 *                    queue is dedicated, else the shared tables;
 *   {L}              the dead-letter queue's message table;
 *   {S.x} / {Q.x}    "x.store_id = $S AND " / "x.queue_id = $Q AND " when
 *                    shared, nothing when dedicated;
 *   {S,} {Q,} {L,}   the key column and a comma, for an insert's list;
 *   {S$} {Q$} {L$}   the key's parameter and a comma, for its values;
 *   {P}              ", priority", the message's priority column (1.12;
 *                    a null int2 where the table has none: a FIFO queue's,
 *                    or one not updated yet);
 *   {C} {R}          ", priority" (a move copies it), " RETURNING priority
 *                    IS NOT NULL" (and says whether one had any), where
 *                    both tables have the column; nothing otherwise;
 *   {O}              "coalesce(m.priority, 4) DESC, " with fair_order (QP_FAIR_RECEIVE_PRIO)
 *                    (each tenant's messages by priority), else nothing;
 *   {N.x}            "x.priority IS NULL AND " where the table has the
 *                    column (the visible_at index's predicate, 1.13);
 *   {+} ... {-}      the text between in a form that reads levels (a
 *                    levels_form, on a table with the column) only;
 *   {!} ... {-}      ... in any other only.
 * $S and $Q are the two parameters after the statement's own (queue_exec
 * binds them), and {L$} is $6 (QP_MOVE_TO_DLQ's).  Only numeric ids ever
 * enter the text.
 */
char *
queue_plan_text(const char *sql, int nargs, bool levels_form, bool fair_order,
				const QueueMeta *q, bool dlq_shared, bool dlq_fifo)
{
	StringInfoData buf;
	int			s_param = nargs + 1;
	int			q_param = nargs + 2;
	bool		levels = levels_form && q->prio_column;

	initStringInfo(&buf);
	for (const char *p = sql; *p; p++)
	{
		const char *close;
		char		what;

		if (p[0] != '{' || strchr("qgdaLSQPOCRN+!-", p[1]) == NULL || p[1] == '\0' ||
			(close = strchr(p, '}')) == NULL || close - p > 4)
		{
			appendStringInfoChar(&buf, *p);
			continue;
		}
		what = p[1];
		if (close - p == 2 && (what == '+' || what == '!'))
		{
			/* a part of one form: kept, or skipped to its {-} */
			if (levels != (what == '+'))
			{
				close = strstr(close, "{-}");
				if (close == NULL)
					elog(ERROR, "bad plan placeholder in \"%s\"", sql);
				close += 2;
			}
		}
		else if (close - p == 2 && what == '-')
			;					/* the end of a part kept */
		else if (p[2] == '.' && what == 'N')	/* {N.x}: the visible_at index's rows */
		{
			if (q->prio_column)
				appendStringInfo(&buf, "%.*s.priority IS NULL AND ", (int) (close - p - 3), p + 3);
		}
		else if (close - p == 2 && what == 'P')	/* {P}: the priority column */
			appendStringInfoString(&buf, q->prio_column ? ", priority" :
								   ", NULL::pg_catalog.int2 AS priority");
		else if (close - p == 2 && what == 'C') /* {C}: the priority a move copies */
			appendStringInfoString(&buf, q->prio_column && !dlq_fifo ? ", priority" : "");
		else if (close - p == 2 && what == 'R') /* {R}: whether a move kept one */
			appendStringInfoString(&buf, q->prio_column && !dlq_fifo ?
								   " RETURNING priority IS NOT NULL" : "");
		else if (close - p == 2 && what == 'O') /* {O}: a fair lease's order */
			appendStringInfoString(&buf, fair_order ?
								   "coalesce(m.priority, 4) DESC, " : "");
		else if (close - p == 2)	/* {x}: a table */
		{
			if (what == 'L')
			{
				if (dlq_shared)
					appendStringInfoString(&buf, queue_shared_table('q', dlq_fifo));
				else
					appendStringInfo(&buf, "queue_data.q" INT64_FORMAT, q->dlq_id);
			}
			else if (q->shared)
				appendStringInfoString(&buf, queue_shared_table(what, q->fifo));
			else
				appendStringInfo(&buf, "queue_data.%c" INT64_FORMAT, what, q->id);
		}
		else if (p[2] == '.')	/* {S.x}: the key condition on alias x */
		{
			if (q->shared)
				appendStringInfo(&buf, "%.*s.%s = $%d AND ", (int) (close - p - 3), p + 3,
								 what == 'S' ? "store_id" : "queue_id",
								 what == 'S' ? s_param : q_param);
		}
		else if (p[2] == ',')	/* {S,}: the key column */
		{
			if (what == 'L' ? dlq_shared : q->shared)
				appendStringInfoString(&buf, what == 'Q' ? "queue_id, " : "store_id, ");
		}
		else if (p[2] == '$')	/* {S$}: the key's value */
		{
			if (what == 'L')
			{
				if (dlq_shared)
					appendStringInfoString(&buf, "$6, ");
			}
			else if (q->shared)
				appendStringInfo(&buf, "$%d, ", what == 'S' ? s_param : q_param);
		}
		else
			elog(ERROR, "bad plan placeholder in \"%s\"", sql);
		p = close;
	}
	return buf.data;
}
