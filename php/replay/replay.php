<?php
// The replay scenarios of docs/DESIGN.md section 5 through real Laravel
// workers: `php artisan queue:work redis` processes of the replay
// application (php/replay), on MariaDB/MySQL or PostgreSQL, every scenario
// for every effect kind, naive (read the state, then act) and guarded
// (GuardMiddleware), the concurrent ones in 2 and 8 worker processes, the
// deaths both as an injected fault and as a real SIGKILL of the worker
// (replaced by a new one). The report has the shape of `onceonly replay
// --json`; the exit status is 1 when a guarded count breaks its policy.
//
//   php php/replay/replay.php [--db mysql|pgsql] [--runs 3] [--json FILE] [--only 2,4] [--keep]
//
// MariaDB on 127.0.0.1 (root), PostgreSQL (postgres), Redis DB
// $ONCEONLY_TEST_REDIS_DB (default 3). Each run uses a database (or schema)
// and a Redis prefix of its own, dropped at the end.
declare(strict_types=1);

$opt = getopt('', ['db:', 'runs:', 'json:', 'only:', 'keep']);
$only = isset($opt['only']) ? array_map('intval', explode(',', (string) $opt['only'])) : null;
$dbKind = (string) ($opt['db'] ?? 'mysql');
$runs = (int) ($opt['runs'] ?? 3);
$jsonOut = $opt['json'] ?? null;
$runId = 'laravel_replay_' . bin2hex(random_bytes(3));
$started = microtime(true);
$faults = sys_get_temp_dir() . "/$runId-faults";
mkdir($faults);

$env = [
    'DB_CONNECTION' => $dbKind, 'DB_DATABASE' => $runId, 'PG_DATABASE' => 'laravel_php', 'PG_ONCEONLY_SCHEMA' => $runId, 'PG_APP_SCHEMA' => "{$runId}_app",
    'REDIS_DB' => getenv('ONCEONLY_TEST_REDIS_DB') ?: '3', 'REDIS_PREFIX' => "$runId:", 'QUEUE_RETRY_AFTER' => '3',
    'REPLAY_FAULTS' => $faults, 'APP_STORAGE' => sys_get_temp_dir() . "/$runId-storage",
];
foreach ($env as $k => $v) {
    putenv("$k=$v");
    $_ENV[$k] = $v;
}
@mkdir($env['APP_STORAGE'] . '/logs', 0777, true);
if ($dbKind === 'mysql') {
    (new PDO('mysql:host=127.0.0.1', 'root', ''))->exec("CREATE DATABASE `$runId`");
}

$app = require __DIR__ . '/bootstrap/app.php';
$app->make(Illuminate\Contracts\Console\Kernel::class)->bootstrap();
$db = $app['db']->connection();
$store = $app->make(Onceonly\Laravel\Records::class)->store();
$store->migrate();
$schema = $db->getSchemaBuilder();
if ($dbKind === 'pgsql') {
    $db->statement("CREATE SCHEMA \"{$runId}_app\"");
}
$schema->create('replay_items', function ($t) {
    $t->id();
    $t->string('job_type');
    $t->string('op_key');
    $t->string('idem_key');
    $t->integer('live');
});
$schema->create('replay_local', function ($t) {
    $t->string('job_type');
    $t->string('op_key');
});
$schema->create('replay_naive', function ($t) {
    $t->string('job_type');
    $t->string('op_key');
    $t->string('status');
    $t->primary(['job_type', 'op_key']);
});

// -- workers -------------------------------------------------------------------
$procs = [];
$started_workers = 0;
$deaths = [];
$artisan = __DIR__ . '/artisan';
$startWorker = function () use (&$procs, &$started_workers, $artisan, $env): void {
    $log = $env['APP_STORAGE'] . "/logs/worker-$started_workers.log";
    $procs[] = proc_open([PHP_BINARY, $artisan, 'queue:work', 'redis', '--timeout=2', '--sleep=0.2', '--tries=20'],
        [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']], $pipes, null, array_merge(getenv(), $env));
    $started_workers++;
};
$pool = function (int $n) use (&$procs, &$deaths, $startWorker): void {
    foreach ($procs as $i => $p) {
        $s = proc_get_status($p);
        if (!$s['running']) {
            if ($s['termsig'] === SIGKILL || $s['exitcode'] === 137 || $s['signaled']) {
                $deaths[] = ['pid' => $s['pid'], 'signal' => 'SIGKILL'];
            }
            proc_close($p);
            unset($procs[$i]);
        }
    }
    $procs = array_values($procs);
    while (count($procs) < $n) {
        $startWorker();
    }
    while (count($procs) > $n) {
        $p = array_pop($procs);
        proc_terminate($p, SIGTERM);
        proc_close($p);
    }
};

$redis = new Redis();
$redis->connect('127.0.0.1', 6379);
$redis->select((int) $env['REDIS_DB']);
$queued = function () use ($redis, $env): int {
    $q = $env['REDIS_PREFIX'] . 'queues:default';
    return $redis->lLen($q) + $redis->zCard("$q:delayed") + $redis->zCard("$q:reserved");
};
$settle = function (int $workers, float $timeout = 40) use ($pool, $queued): bool {
    $deadline = microtime(true) + $timeout;
    usleep(200_000);
    while (microtime(true) < $deadline) {
        $pool($workers);
        if ($queued() === 0) {
            usleep(200_000);
            if ($queued() === 0) {
                return true;
            }
        }
        usleep(100_000);
    }
    return false;
};

// -- the scenarios ---------------------------------------------------------------
$kinds = ['local', 'keyed', 'lookup', 'opaque/hold', 'opaque/at-least-once', 'opaque/at-most-once'];
$allowed = static function (int $n, string $kind): array {
    $one = ['min' => 1, 'max' => 1];
    return match ($n) {
        3 => in_array($kind, ['opaque/hold', 'opaque/at-most-once'], true) ? ['min' => 0, 'max' => 0] : $one,
        4 => $kind === 'opaque/at-least-once' ? ['min' => 1, 'max' => 2] : $one,
        5 => in_array($kind, ['opaque/hold', 'opaque/at-most-once'], true) ? ['min' => 0, 'max' => 0] : $one,
        6 => ['min' => 2, 'max' => 2],
        7 => ['min' => 0, 'max' => 1, 'counted' => 'live'],
        default => $one,
    };
};
$scenarios = [
    [1, 'same message 3 times', 'repeat', null],
    [2, '2 workers at once', 'concurrent', 2],
    [2, '8 workers at once', 'concurrent', 8],
    [3, 'dies after claim (fault)', 'crash', ['after_claim', 'fault']],
    [3, 'dies after claim (SIGKILL)', 'crash', ['after_claim', 'sigkill']],
    [4, 'dies after effect (fault)', 'crash', ['after_effect', 'fault']],
    [4, 'dies after effect (SIGKILL)', 'crash', ['after_effect', 'sigkill']],
    [5, 'young claim kept, old by policy', 'stale', null],
    [6, '2 ops, similar data', 'similar', null],
    [7, 'cancel while sending', 'cancel', null],
    [8, 'failure after success', 'fail_after', null],
    [9, 'same key, other payload', 'other_payload', null],
];

$effects = function (string $job, string $kind, bool $live) use ($db): int {
    if ($kind === 'local') {
        return $db->table('replay_local')->where('job_type', $job)->count();
    }
    $q = $db->table('replay_items')->where('job_type', $job);
    return $live ? $q->where('live', 1)->count() : $q->count();
};
$records = function (string $job) use ($store): array {
    $pdo = $store->pdo();
    $table = $store instanceof Onceonly\Store\PgStore ? "\"{$store->schema}\".ops" : 'onceonly_ops';
    $st = $pdo->prepare("SELECT state, COUNT(*) AS n FROM $table WHERE job_type = ? GROUP BY state");
    $st->execute([$job]);
    $states = [];
    foreach ($st->fetchAll(PDO::FETCH_ASSOC) as $r) {
        $states[$r['state']] = (int) $r['n'];
    }
    ksort($states);
    return ['count' => array_sum($states), 'states' => $states];
};

$entries = [];
$sigkillsBefore = 0;
foreach ($scenarios as $si => [$number, $title, $scenario, $arg]) {
    if ($only !== null && !in_array($number, $only, true)) {
        continue;
    }
    $t0 = microtime(true);
    $deathsBefore = count($deaths);
    $startedBefore = $started_workers;
    $workers = $scenario === 'concurrent' ? $arg : 2;
    $pool($workers);
    usleep($scenario === 'concurrent' ? 3_000_000 : 300_000); // every worker booted before the deliveries
    fwrite(STDERR, sprintf("[%2d/%d] %s\n", $si + 1, count($scenarios), $title));
    $jobsOf = [];
    foreach (['naive', 'guarded'] as $mode) {
        foreach ($kinds as $kind) {
            if ($scenario === 'cancel' && $kind === 'local') {
                continue;
            }
            $job = "$runId.s$si." . str_replace(['/', '-'], ['.', '_'], $kind) . ".$mode";
            $jobsOf[$mode][$kind] = $job;
            $p = ['to' => 'a@example.com', 'scenario' => $scenario];
            $send = fn (string $key, array $payload, ?array $fault = null, bool $cancel = false, bool $fail = false)
                => App\Jobs\ReplayJob::dispatch($job, $kind, $key, $payload, $mode, $fault, $cancel, $fail);
            switch ($scenario) {
                case 'repeat':
                case 'fail_after':
                case 'other_payload':
                    // delivered one after another: below
                    break;
                case 'concurrent':
                    for ($r = 0; $r < $runs; $r++) {
                        for ($i = 0; $i < $arg; $i++) {
                            $send("run-$r", $p);
                        }
                    }
                    break;
                case 'crash':
                    $send('k', $p, $arg);
                    break;
                case 'stale':
                    if ($mode === 'guarded' && $kind === 'local') {
                        // A local claim lives inside its transaction: the dead worker's is
                        // one still open (its row locked), rolled back when it "dies" below.
                        $dead = $store instanceof Onceonly\Store\PgStore
                            ? new PDO(Onceonly\Store\PgStore::dsn($store->url)[0], 'postgres')
                            : new PDO(...Onceonly\Store\MySqlStore::dsn($store->url));
                        $dead->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
                        $dead->beginTransaction();
                        $store->claim($job, 'k', 'replay-dead-worker', Onceonly\Payload::of($p), 3000, $dead);
                        $deadTx = $dead;
                    } elseif ($mode === 'guarded') {
                        // A worker that claimed and died before acting, just now: its lease (3 s)
                        // keeps the first delivery out; after it, the policy settles the claim.
                        $store->claim($job, 'k', 'replay-dead-worker', Onceonly\Payload::of($p), 3000);
                    }
                    $send('k', $p);
                    break;
                case 'similar':
                    $send('k-1', $p + ['amount' => 5]);
                    $send('k-2', $p + ['amount' => 5]);
                    break;
                case 'cancel':
                    $send('k', $p, null, $mode === 'guarded');
                    break;
            }
        }
    }
    if (isset($deadTx)) {
        usleep(1_500_000); // the delivery waits on the dead worker's row lock meanwhile
        $deadTx->rollBack();
        unset($deadTx);
    }
    // The sequential scenarios: each delivery after the last one settled.
    if (in_array($scenario, ['repeat', 'fail_after', 'other_payload'], true)) {
        for ($d = 0; $d < ($scenario === 'repeat' ? 3 : 2); $d++) {
            foreach ($jobsOf as $mode => $byKind) {
                foreach ($byKind as $kind => $job) {
                    $payload = ['to' => 'a@example.com', 'scenario' => $scenario] + ($scenario === 'other_payload' && $d === 1 ? ['amount' => 9] : []);
                    App\Jobs\ReplayJob::dispatch($job, $kind, 'k', $payload, $mode, null, false, $scenario === 'fail_after' && $d === 1);
                }
            }
            $settle($workers);
        }
    }
    $settled = $settle($workers, 60);
    // Every guarded operation recorded and settled (a queue seen empty for a
    // moment is not enough: wait for the records too).
    $expected = match ($scenario) {
        'concurrent' => $runs,
        'similar' => 2,
        default => 1,
    };
    $deadline = microtime(true) + 30;
    while (microtime(true) < $deadline) {
        $short = false;
        foreach ($jobsOf['guarded'] as $job) {
            $r = $records($job);
            if ($r['count'] < $expected || isset($r['states']['claimed'])) {
                $short = true;
            }
        }
        if (!$short && $queued() === 0) {
            break;
        }
        $pool($workers);
        usleep(200_000);
    }
    $pool($workers);
    $scenarioKills = count($deaths) - $deathsBefore;
    foreach ($kinds as $kind) {
        $a = $allowed($number, $kind) + ['counted' => 'effects'];
        $base = ['number' => $number, 'title' => $title, 'scenario' => $scenario, 'kind' => $kind, 'variant' => is_array($arg) ? $arg[1] : ($scenario === 'concurrent' ? "$arg workers" : null)];
        if (!isset($jobsOf['guarded'][$kind])) {
            $entries[] = $base + ['allowed' => $a, 'verdict' => 'n/a', 'pass' => true, 'failures' => [], 'naive' => ['total' => null], 'guarded' => ['total' => null],
                'records' => ['count' => 0, 'states' => []], 'skipped' => 'a local claim lives only inside its transaction: nothing outside can see it, or cancel it, while it runs'];
            continue;
        }
        $live = ($a['counted'] === 'live');
        $naive = $effects($jobsOf['naive'][$kind], $kind, $live);
        $guarded = $effects($jobsOf['guarded'][$kind], $kind, $live);
        $rec = $records($jobsOf['guarded'][$kind]);
        $per = $scenario === 'concurrent' ? $runs : 1;
        $failures = [];
        if (!$settled) {
            $failures[] = 'the queue did not empty within 60 s';
        }
        if ($guarded < $a['min'] * $per || $guarded > $a['max'] * $per) {
            $failures[] = "guarded effects $guarded, allowed {$a['min']}-{$a['max']}" . ($per > 1 ? " per run over $per runs" : '');
        }
        if (isset($rec['states']['claimed'])) {
            $failures[] = 'a claim was left unsettled';
        }
        $entries[] = $base + [
            'allowed' => $a + ['runs' => $per],
            'naive' => ['total' => $naive],
            'guarded' => ['total' => $guarded],
            'records' => $rec,
            'runs' => $per,
            'job_type' => $jobsOf['guarded'][$kind],
            'error' => null,
            'skipped' => null,
            'processes' => $started_workers - $startedBefore,
            'sigkills' => $scenarioKills,
            'failures' => $failures,
            'pass' => !$failures,
            'verdict' => $failures ? 'fail' : 'pass',
            'elapsed_ms' => (int) ((microtime(true) - $t0) * 1000),
        ];
    }
}
$pool(0);

// -- the report -------------------------------------------------------------------
$summary = ['pass' => 0, 'fail' => 0, 'not_applicable' => 0, 'skipped' => 0];
foreach ($entries as $e) {
    $summary[$e['verdict'] === 'n/a' ? 'not_applicable' : $e['verdict']]++;
}
$report = [
    'queue' => 'laravel', 'db' => $dbKind === 'mysql' ? "mysql://root@127.0.0.1:3306/$runId" : "postgres://postgres@127.0.0.1:5432/laravel_php (schema $runId)",
    'run_id' => $runId, 'runs' => $runs, 'entries' => $entries, 'summary' => $summary, 'pass' => $summary['fail'] === 0,
    'processes' => $started_workers, 'worker_deaths' => $deaths, 'elapsed_ms' => (int) ((microtime(true) - $started) * 1000),
];
printf("%-2s %-32s %-22s %9s %6s %8s  %-22s %s\n", '#', 'scenario', 'kind', 'allowed', 'naive', 'guarded', 'records', 'result');
$last = null;
foreach ($entries as $e) {
    $label = $last === $e['title'] ? ['', ''] : [$e['number'], $e['title']];
    $last = $e['title'];
    $a = $e['allowed'];
    $allowedText = $e['verdict'] === 'n/a' ? 'n/a' : (($a['min'] === $a['max'] ? $a['min'] : "{$a['min']}-{$a['max']}") . (($a['runs'] ?? 1) > 1 ? " x{$a['runs']}" : '') . ($a['counted'] === 'live' ? ' live' : ''));
    $states = implode(',', array_map(fn ($s, $n) => "$n $s", array_keys($e['records']['states']), $e['records']['states']));
    printf("%-2s %-32s %-22s %9s %6s %8s  %-22s %s\n", $label[0], $label[1], $e['kind'], $allowedText, $e['naive']['total'] ?? '-', $e['guarded']['total'] ?? '-', $states, $e['verdict']);
}
foreach ($entries as $e) {
    foreach ($e['failures'] as $f) {
        printf("FAIL %d %s [%s]: %s\n", $e['number'], $e['title'], $e['kind'], $f);
    }
}
printf("%s: %s (%d pass, %d fail, %d n/a); %d queue:work processes, %d killed by SIGKILL and replaced; %s, %.1fs, run %s\n",
    $report['pass'] ? 'PASS' : 'FAIL',
    $report['pass'] ? 'every guarded count within what its policy allows' : 'a guarded count broke its policy',
    $summary['pass'], $summary['fail'], $summary['not_applicable'], $started_workers, count($deaths), $report['db'], $report['elapsed_ms'] / 1000, $runId);
if ($jsonOut !== null) {
    file_put_contents($jsonOut, json_encode($report, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES) . "\n");
}

// -- clean up ------------------------------------------------------------------------
if (isset($opt['keep'])) {
    fwrite(STDERR, "kept $runId\n");
    exit($report['pass'] ? 0 : 1);
}
$keys = $redis->keys($env['REDIS_PREFIX'] . '*');
if ($keys) {
    $redis->del($keys);
}
$store->close();
$db->disconnect();
if ($dbKind === 'mysql') {
    (new PDO('mysql:host=127.0.0.1', 'root', ''))->exec("DROP DATABASE `$runId`");
} else {
    $pg = new PDO('pgsql:host=127.0.0.1;dbname=laravel_php', 'postgres');
    $pg->exec("DROP SCHEMA \"$runId\" CASCADE");
    $pg->exec("DROP SCHEMA \"{$runId}_app\" CASCADE");
}
array_map('unlink', glob("$faults/*") ?: []);
rmdir($faults);
exit($report['pass'] ? 0 : 1);
