/*-------------------------------------------------------------------------
 *
 * fifo.c
 *	  FIFO message groups: the locks that order senders, and the group
 *	  scheduling rows that receivers read.
 *
 * Each non-empty group of a FIFO queue has a row in g<id> holding the
 * sequence number of its head message and the time it can next deliver.
 * Everything that changes a group's messages first locks that row: a
 * sender (so senders of one group follow each other in commit order and
 * draw their sequence numbers in that order), a receive (FOR UPDATE SKIP
 * LOCKED: a group someone is working on is skipped, never waited for) and
 * a delete or visibility change (which then recomputes the row).  Locks are
 * always taken in group-id byte order, so two batches cannot deadlock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "queue.h"

static int
text_cmp(const void *a, const void *b)
{
	text	   *ta = DatumGetTextPP(*(const Datum *) a);
	text	   *tb = DatumGetTextPP(*(const Datum *) b);
	int			la = VARSIZE_ANY_EXHDR(ta);
	int			lb = VARSIZE_ANY_EXHDR(tb);
	int			c = memcmp(VARDATA_ANY(ta), VARDATA_ANY(tb), Min(la, lb));

	return c != 0 ? c : (la > lb) - (la < lb);
}

/* Sort texts in byte order (COLLATE "C") and drop repeats; the new count. */
int
queue_sort_unique_texts(Datum *vals, int n)
{
	int			m = 0;

	qsort(vals, n, sizeof(Datum), text_cmp);
	for (int i = 0; i < n; i++)
		if (m == 0 || text_cmp(&vals[m - 1], &vals[i]) != 0)
			vals[m++] = vals[i];
	return m;
}

/*
 * Lock the rows of the given groups (sorted, unique), creating those that
 * do not exist; created[i] tells which were created (their head is set by
 * queue_fifo_refresh_groups once their messages are in).
 */
void
queue_fifo_lock_groups(QueueMeta *q, int ngroups, Datum *groups, bool *created)
{
	bool	   *locked = palloc0(ngroups * sizeof(bool));
	Datum	   *todo = palloc(ngroups * sizeof(Datum));

	memset(created, 0, ngroups * sizeof(bool));

	/*
	 * Lock what exists; insert what does not.  An insert that meets a
	 * concurrent one waits for it, and if that one committed, the group
	 * now exists: go round again and lock it.
	 */
	for (int round = 0;; round++)
	{
		int			ntodo = 0;
		Datum		arg;
		int			rc;

		for (int i = 0; i < ngroups; i++)
			if (!locked[i])
				todo[ntodo++] = groups[i];
		if (ntodo == 0)
			break;
		if (round > 10)
			elog(ERROR, "could not lock message groups");

		arg = queue_text_array(ntodo, todo, NULL);
		rc = SPI_execute_plan(queue_plan(q, (round % 2 == 0) ? QP_GROUP_LOCK : QP_GROUP_INSERT),
							  &arg, NULL, false, 0);
		if (rc != SPI_OK_UPDATE_RETURNING && rc != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "locking message groups failed: %s", SPI_result_code_string(rc));
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			Datum		g = SPI_getbinval(SPI_tuptable->vals[r],
										  SPI_tuptable->tupdesc, 1, &isnull);

			for (int i = 0; i < ngroups; i++)
				if (!locked[i] && text_cmp(&g, &groups[i]) == 0)
				{
					locked[i] = true;
					created[i] = (rc == SPI_OK_INSERT_RETURNING);
				}
		}
	}
}

/* Recompute the scheduling rows of groups whose messages changed. */
void
queue_fifo_refresh_groups(QueueMeta *q, int ngroups, Datum *groups)
{
	Datum		args[2];
	int			rc;

	if (ngroups == 0)
		return;
	args[0] = queue_text_array(ngroups, groups, NULL);
	args[1] = TimestampTzGetDatum(GetCurrentTimestamp());
	rc = SPI_execute_plan(queue_plan(q, QP_GROUP_REFRESH), args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "refreshing message groups failed: %s", SPI_result_code_string(rc));
}

/*
 * The group ids in the first column of the last SPI result, copied out of
 * SPI's memory (they outlive the next statement); returns how many.
 */
int
queue_spi_groups(Datum **groups)
{
	int			n = (int) SPI_processed;

	*groups = palloc(Max(n, 1) * sizeof(Datum));
	for (int r = 0; r < n; r++)
	{
		bool		isnull;

		(*groups)[r] = PointerGetDatum(PG_DETOAST_DATUM_COPY(
			SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull)));
	}
	return n;
}

/*
 * Lock the groups of the given messages, before a delete or visibility
 * change; returns the groups (for the refresh after).
 */
int
queue_fifo_lock_groups_of(QueueMeta *q, int n, const int64 *ids, Datum **groups)
{
	Datum		arg = queue_int8_array(n, ids);
	int			rc;

	rc = SPI_execute_plan(queue_plan(q, QP_GROUP_LOCK_OF_MSGS), &arg, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "locking message groups failed: %s", SPI_result_code_string(rc));
	return queue_spi_groups(groups);
}
