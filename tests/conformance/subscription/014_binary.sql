-- postgres/postgres src/test/subscription/t/014_binary.pl
-- commit 50e6eb731d98ab6d0e625a0b87fb327b172bbebd
--
-- Binary tuples (the subscription's binary = true: source.binary for this case's bridge,
-- in both modes; its snapshot reads with binary COPY): numerics, arrays as primary keys,
-- updates of array elements and NULLs. A type without send and receive functions is sent
-- as text in binary mode; the TAP then gives it binary functions (its row, inserted
-- before, is copied by the subscriber's refresh; the bridge streamed it already). The
-- subscriber's switches between binary and text, its type mismatch and its errors have
-- no publisher side.
--! bridge tpub binary=true

CREATE TABLE public.test_numerical (
	a INTEGER PRIMARY KEY,
	b NUMERIC,
	c FLOAT,
	d BIGINT
	);
CREATE TABLE public.test_arrays (
	a INTEGER[] PRIMARY KEY,
	b NUMERIC[],
	c TEXT[]
	);
CREATE PUBLICATION tpub FOR ALL TABLES;
INSERT INTO public.test_numerical (a, b, c, d) VALUES
	(1, 1.2, 1.3, 10),
	(2, 2.2, 2.3, 20);
INSERT INTO public.test_arrays (a, b, c) VALUES
	('{1,2,3}', '{1.1, 1.2, 1.3}', '{"one", "two", "three"}'),
	('{3,1,2}', '{1.3, 1.1, 1.2}', '{"three", "one", "two"}');
--! start
--! check

INSERT INTO public.test_arrays (a, b, c) VALUES
	('{2,1,3}', '{1.2, 1.1, 1.3}', '{"two", "one", "three"}'),
	('{1,3,2}', '{1.1, 1.3, 1.2}', '{"one", "three", "two"}');
INSERT INTO public.test_numerical (a, b, c, d) VALUES
	(3, 3.2, 3.3, 30),
	(4, 4.2, 4.3, 40);
--! check

UPDATE public.test_arrays SET b[1] = 42, c = NULL;
UPDATE public.test_numerical SET b = 42, c = NULL;
--! check

INSERT INTO public.test_numerical (a, b, c, d) VALUES
	(5, 5.2, 5.3, 50);
--! check
INSERT INTO public.test_arrays (a, b, c) VALUES
	('{2,3,1}', '{1.2, 1.3, 1.1}', '{"two", "three", "one"}');
--! check

CREATE TYPE myvarchar;
CREATE FUNCTION myvarcharin(cstring, oid, integer) RETURNS myvarchar
    LANGUAGE internal IMMUTABLE PARALLEL SAFE STRICT AS 'varcharin';
CREATE FUNCTION myvarcharout(myvarchar) RETURNS cstring
    LANGUAGE internal IMMUTABLE PARALLEL SAFE STRICT AS 'varcharout';
CREATE TYPE myvarchar (
    input = myvarcharin,
    output = myvarcharout);
CREATE TABLE public.test_myvarchar (
    a myvarchar
);
INSERT INTO public.test_myvarchar (a) VALUES
	('a');
--! check

CREATE FUNCTION myvarcharsend(myvarchar) RETURNS bytea
    LANGUAGE internal STABLE PARALLEL SAFE STRICT AS 'varcharsend';
CREATE FUNCTION myvarcharrecv(internal, oid, integer) RETURNS myvarchar
    LANGUAGE internal STABLE PARALLEL SAFE STRICT AS 'varcharrecv';
ALTER TYPE myvarchar SET (
    send = myvarcharsend,
    receive = myvarcharrecv
);
--! check

CREATE TABLE public.test_mismatching_types (
    a bigint PRIMARY KEY
);
INSERT INTO public.test_mismatching_types (a)
    VALUES (1), (2);
--! check
