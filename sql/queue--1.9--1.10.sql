/* queue--1.9--1.10.sql */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.10'" to load this file. \quit

/*
 * A moved topic keeps its table's grants exactly (issue 48): the grant
 * option of each grant, and who granted it.  1.9 granted each privilege
 * once, without WITH GRANT OPTION, as the caller: a role the topic's owner
 * had given the right to pass a privilege on lost it with the move, and
 * the grants that role had made were recorded as the owner's.
 *
 * Each item of the old node's ACL (as text: roles by name, which the new
 * node reads by its own oids) is granted by its grantor: the owner's as
 * the superuser running the move (PostgreSQL records the owner as their
 * grantor), another role's as that role (SET LOCAL ROLE; GRANT ... GRANTED
 * BY must name the current user before PostgreSQL 16; USAGE on queue_data
 * lent for the statement when this node's schema grants do not give it),
 * once the grants it rests on (its grantor's grant option) are there; so
 * in passes, at most as many as the ACL has items.  An item whose grantor never receives its
 * grant option (an ACL no node could hold) is refused, not dropped.
 */
CREATE OR REPLACE FUNCTION @extschema@._citus_grant_acl(rel regclass, acl text)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	owner oid;
	items pg_catalog.aclitem[];
	g record;
	done_any boolean;
	lent boolean;
BEGIN
	IF acl IS NULL OR pg_catalog.cardinality(acl::pg_catalog.aclitem[]) OPERATOR(pg_catalog.=) 0 THEN
		RETURN;
	END IF;
	items := acl::pg_catalog.aclitem[];
	SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel;
	FOR pass IN 1 .. pg_catalog.cardinality(items) LOOP
		done_any := false;
		FOR g IN
			SELECT x.grantor, x.grantee, x.privilege_type, x.is_grantable
			  FROM pg_catalog.aclexplode(items) x
			 WHERE x.grantee OPERATOR(pg_catalog.<>) owner
			   /* not there yet */
			   AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) y
							   WHERE c.oid OPERATOR(pg_catalog.=) rel
								 AND y.grantor OPERATOR(pg_catalog.=) x.grantor
								 AND y.grantee OPERATOR(pg_catalog.=) x.grantee
								 AND y.privilege_type OPERATOR(pg_catalog.=) x.privilege_type
								 AND y.is_grantable OPERATOR(pg_catalog.>=) x.is_grantable)
			   /* its grantor may grant it now */
			   AND (x.grantor OPERATOR(pg_catalog.=) owner
					OR EXISTS (SELECT FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) y
							   WHERE c.oid OPERATOR(pg_catalog.=) rel
								 AND y.grantee OPERATOR(pg_catalog.=) x.grantor
								 AND y.privilege_type OPERATOR(pg_catalog.=) x.privilege_type
								 AND y.is_grantable))
		LOOP
			IF g.grantor OPERATOR(pg_catalog.<>) owner THEN
				/* naming the table needs USAGE on queue_data, which schema grants of this node may not give */
				lent := NOT pg_catalog.has_schema_privilege(g.grantor, 'queue_data', 'USAGE');
				IF lent THEN
					EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA queue_data TO %s', g.grantor::pg_catalog.regrole);
				END IF;
				PERFORM pg_catalog.set_config('role', g.grantor::pg_catalog.regrole::text, true);
			END IF;
			EXECUTE pg_catalog.format('GRANT %s ON TABLE %s TO %s%s', g.privilege_type, rel,
				CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE g.grantee::pg_catalog.regrole::text END,
				CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
			IF g.grantor OPERATOR(pg_catalog.<>) owner THEN
				PERFORM pg_catalog.set_config('role', 'none', true);
				IF lent THEN
					EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA queue_data FROM %s', g.grantor::pg_catalog.regrole);
				END IF;
			END IF;
			done_any := true;
		END LOOP;
		EXIT WHEN NOT done_any;
	END LOOP;
	IF EXISTS (SELECT FROM pg_catalog.aclexplode(items) x
			   WHERE x.grantee OPERATOR(pg_catalog.<>) owner
				 AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) y
								 WHERE c.oid OPERATOR(pg_catalog.=) rel
								   AND y.grantor OPERATOR(pg_catalog.=) x.grantor
								   AND y.grantee OPERATOR(pg_catalog.=) x.grantee
								   AND y.privilege_type OPERATOR(pg_catalog.=) x.privilege_type
								   AND y.is_grantable OPERATOR(pg_catalog.=) x.is_grantable)) THEN
		RAISE EXCEPTION 'the grants of % could not be made as they were: %', rel, acl
			USING ERRCODE = '55000';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_grant_acl(regclass, text) FROM PUBLIC;
