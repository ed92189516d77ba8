/* queue--1.8--1.9.sql */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.9'" to load this file. \quit

/*
 * Statistics that do not lie about the shared tables' keys (issue 38).
 * ANALYZE of a shared table under a long-held snapshot samples a few live
 * rows among tens of thousands of dead ones, finds every value of its key
 * column (store_id, queue_id) distinct and records it as unique; a plan
 * made again after it (plans are kept, and made again after every ANALYZE)
 * then took "store_id = $n" for one row and read a store's whole key range
 * to find ten message ids.  A key column's number of distinct values is
 * fixed at one here, the case the plans must survive: a store holds every
 * row.  (storage/plans.c also plans every queue_data table as a large one.)
 */
ALTER TABLE queue_data.messages ALTER COLUMN store_id SET (n_distinct = 1);
ALTER TABLE queue_data.fifo_messages ALTER COLUMN store_id SET (n_distinct = 1);
ALTER TABLE queue_data.groups ALTER COLUMN store_id SET (n_distinct = 1);
ALTER TABLE queue_data.dedup_ids ALTER COLUMN queue_id SET (n_distinct = 1);
ALTER TABLE queue_data.receive_attempts ALTER COLUMN queue_id SET (n_distinct = 1);
