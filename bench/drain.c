/*
 * The walsender's limit with a client that does nothing (bench/compare.py's "drain"):
 * START_REPLICATION on a logical slot, every CopyData message received and dropped, a
 * standby status update every 10 s and whenever the server asks, until the stream
 * passes END. pg_recvlogical does the same plus a write of each message to its output
 * file; this one keeps even that out, so the two side by side show what a client's
 * own work per message costs the walsender's rate.
 *
 *     drain CONNINFO SLOT END OPTIONS
 *
 * CONNINFO includes replication=database; END is an LSN (X/X); OPTIONS is the
 * parenthesised option list of START_REPLICATION, e.g. (proto_version '3', ...).
 * Exit status 0 once a message or keepalive at or past END arrived, 1 on any error.
 * The messages received are printed to stdout at the end.
 */
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define EPOCH_OFFSET_US 946684800000000LL /* 1970-01-01 to PostgreSQL's 2000-01-01 */

static uint64_t get64(const char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | (unsigned char) p[i];
    return v;
}

static void put64(char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (char) (v & 0xff);
}

static int64_t now_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t) tv.tv_sec * 1000000 + tv.tv_usec - EPOCH_OFFSET_US;
}

/* 'r': written, flushed and applied up to pos (what pg_recvlogical reports too). */
static int status(PGconn *conn, uint64_t pos)
{
    char msg[34];
    msg[0] = 'r';
    put64(msg + 1, pos);
    put64(msg + 9, pos);
    put64(msg + 17, pos);
    put64(msg + 25, (uint64_t) now_us());
    msg[33] = 0;
    return PQputCopyData(conn, msg, sizeof msg) == 1 && PQflush(conn) == 0;
}

static int fail(PGconn *conn, const char *what)
{
    fprintf(stderr, "drain: %s: %s", what, PQerrorMessage(conn));
    PQfinish(conn);
    return 1;
}

int main(int argc, char **argv)
{
    unsigned hi, lo;
    if (argc != 5 || sscanf(argv[3], "%X/%X", &hi, &lo) != 2) {
        fprintf(stderr, "usage: drain CONNINFO SLOT END OPTIONS\n");
        return 1;
    }
    uint64_t end = ((uint64_t) hi << 32) | lo, pos = 0, messages = 0;
    PGconn *conn = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK)
        return fail(conn, "connect");
    char *slot = PQescapeIdentifier(conn, argv[2], strlen(argv[2]));
    size_t size = strlen(slot) + strlen(argv[4]) + 64;
    char *query = malloc(size);
    snprintf(query, size, "START_REPLICATION SLOT %s LOGICAL 0/0 %s", slot, argv[4]);
    PGresult *res = PQexec(conn, query);
    if (PQresultStatus(res) != PGRES_COPY_BOTH)
        return fail(conn, "START_REPLICATION");
    PQclear(res);
    int64_t last_status = now_us();
    for (;;) {
        char *buf;
        int n = PQgetCopyData(conn, &buf, 0);
        if (n < 0)
            return fail(conn, "stream ended before END");
        int done = 0;
        if (buf[0] == 'w' && n >= 25) {
            messages++;
            pos = get64(buf + 1);
            done = pos >= end;
        } else if (buf[0] == 'k' && n >= 18) {
            uint64_t wal_end = get64(buf + 1);
            done = wal_end >= end;
            if (done)
                pos = wal_end;
            if (buf[17] && !status(conn, pos))
                return fail(conn, "status update");
        }
        PQfreemem(buf);
        if (done)
            break;
        if (now_us() - last_status >= 10000000) {
            if (!status(conn, pos))
                return fail(conn, "status update");
            last_status = now_us();
        }
    }
    if (!status(conn, pos) || PQputCopyEnd(conn, NULL) != 1 || PQflush(conn) != 0)
        return fail(conn, "status update");
    printf("%llu\n", (unsigned long long) messages);
    PQfinish(conn);
    return 0;
}
