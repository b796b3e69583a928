/* A thread running queued jobs ahead of the trainer (ahead.h). */
#include "dist/ahead.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/clock.h"

struct job {
    int job;
    void *arg;
};

struct tr_ahead {
    tr_ahead_fn run;
    void *ctx;
    const struct tr_comm *comm;
    const char *what;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t queued, ran;   /* a job for the thread; a job run, for the waiter */
    struct job *jobs;
    int cap, count, done;         /* jobs[done … count) are still to run */
    int rc;                       /* the first failure of the round, its sentence in why */
    int failed;                   /* its place: a wait for an earlier one is not failed */
    struct tr_diag why;
    double seconds;
    bool stop;
};

static void *work(void *arg)
{
    struct tr_ahead *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->stop && a->done == a->count)
            pthread_cond_wait(&a->queued, &a->lock);
        if (a->stop)
            break;
        struct job j = a->jobs[a->done];
        bool skip = a->rc != 0;   /* after a failure: counted as run, not run */
        pthread_mutex_unlock(&a->lock);
        struct tr_diag why = {0};
        double began = tr_now();
        int rc = skip ? 0 : a->run(a->ctx, j.job, j.arg, &why);
        pthread_mutex_lock(&a->lock);
        a->seconds += tr_now() - began;
        if (rc && !a->rc)
            a->rc = rc, a->why = why, a->failed = a->done;
        else
            tr_diag_free(&why);
        a->done++;
        pthread_cond_broadcast(&a->ran);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

struct tr_ahead *tr_ahead_start(tr_ahead_fn run, void *ctx, const struct tr_comm *c, const char *what)
{
    struct tr_ahead *a = tr_xcalloc(1, sizeof *a);
    *a = (struct tr_ahead){.run = run, .ctx = ctx, .comm = c, .what = what};
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->queued, NULL);
    pthread_cond_init(&a->ran, NULL);
    if (pthread_create(&a->thread, NULL, work, a)) {
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->queued), pthread_cond_destroy(&a->ran);
        free(a);
        return NULL;
    }
    return a;
}

void tr_ahead_queue(struct tr_ahead *a, int at, int job, void *arg)
{
    pthread_mutex_lock(&a->lock);
    if (at == 0) {   /* another round: the last one's jobs all run first */
        while (a->done < a->count)
            pthread_cond_wait(&a->ran, &a->lock);
        a->count = a->done = 0;
        a->rc = 0;
        tr_diag_free(&a->why);
    }
    if (a->count == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->jobs = tr_xrealloc(a->jobs, (size_t)a->cap * sizeof *a->jobs);
    }
    a->jobs[a->count++] = (struct job){job, arg};
    pthread_cond_signal(&a->queued);
    pthread_mutex_unlock(&a->lock);
}

int tr_ahead_wait(struct tr_ahead *a, int at, struct tr_diag *d)
{
    pthread_mutex_lock(&a->lock);
    int until = at < a->count ? at + 1 : a->count;
    if (a->done < until) {   /* a wait on the ranks: the watchdog's to time */
        tr_comm_waiting(a->comm, a->what);
        while (a->done < until)
            pthread_cond_wait(&a->ran, &a->lock);
        tr_comm_answered(a->comm);
    }
    int rc = a->rc && a->failed < until ? a->rc : 0;   /* the places waited for ran; one of them failed */
    if (rc)
        rc = tr_fail(d, rc, "%s", tr_diag_last(&a->why));
    pthread_mutex_unlock(&a->lock);
    return rc;
}

double tr_ahead_seconds(struct tr_ahead *a)
{
    pthread_mutex_lock(&a->lock);
    double s = a->seconds;
    pthread_mutex_unlock(&a->lock);
    return s;
}

void tr_ahead_stop(struct tr_ahead *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    pthread_cond_signal(&a->queued);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->queued), pthread_cond_destroy(&a->ran);
    tr_diag_free(&a->why);
    free(a->jobs);
    free(a);
}
