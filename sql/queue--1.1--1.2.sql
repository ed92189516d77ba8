/* queue--1.1--1.2.sql: topics, consumers, failed receives that count */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.2'" to load this file. \quit

/*
 * What 1.2 adds (DESIGN.md "Topics", "Consumers"):
 *  - retry_delay, a queue attribute: a receive whose transaction rolls back
 *    counts, and its message comes back after retry_delay (failed.c);
 *  - topics: publish one message to every subscribed queue whose filters
 *    match, in the publisher's transaction (topic.c, filter.c);
 *  - consumers: the worker receives, calls a SQL handler, deletes and
 *    commits (consumer.c).
 *
 * CREATE EXTENSION of 1.2 runs queue--1.0.sql, queue--1.0--1.1.sql and this
 * file, so a fresh install and an upgraded one have the same catalog.
 */


/* ------------------------------------------------------------------------
 * Failed receives and retry_delay (failed.c)
 * ------------------------------------------------------------------------
 */



/* ------------------------------------------------------------------------
 * Topics (topic.c, filter.c)
 * ------------------------------------------------------------------------
 */



/* ------------------------------------------------------------------------
 * Consumers (consumer.c)
 * ------------------------------------------------------------------------
 */

