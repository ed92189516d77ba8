/* queue--1.3--1.3.1.sql: what runs in the background is safe (issue 23) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.3.1'" to load this file. \quit

/*
 * 1.3.1 changes no message and no queue.  It is numbered 1.3.1, not 1.4,
 * because DESIGN.md keeps 1.4 for the storage rework.  What it adds:
 *  - consumers keep the search_path their creator had at create_consumer
 *    (the handler runs under it) and show it in queue.consumers, with the
 *    state 'waiting' when no process is free for them;
 *  - roles that own a consumer or a subscription cannot be dropped.
 */
