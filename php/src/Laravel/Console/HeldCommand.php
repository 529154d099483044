<?php

declare(strict_types=1);

namespace Onceonly\Laravel\Console;

use Illuminate\Console\Command;
use Onceonly\Answer;
use Onceonly\Laravel\Records;

/** Held operations, waiting for a person, oldest first (as `onceonly held`; resolve one with `onceonly resolve`). */
final class HeldCommand extends Command
{
    protected $signature = 'onceonly:held {--job= : one job type} {--database= : the database connection} {--json : one JSON object per line}';
    protected $description = 'Held operations, waiting for a person, oldest first';

    public function handle(Records $records): int
    {
        $rows = $records->store($this->option('database'))->held($this->option('job'));
        foreach ($rows as $r) {
            if ($this->option('json')) {
                $this->line(json_encode(['job' => $r->jobType, 'key' => $r->opKey, 'state' => $r->state->value, 'token' => $r->token,
                    'attempts' => $r->attempts, 'owner' => $r->owner, 'external_ref' => $r->externalRef, 'error' => $r->error,
                    'claimed_at' => $r->claimedAt, 'lease_until' => $r->leaseUntil], JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE));
                continue;
            }
            $this->line(sprintf('%s:%s token %d, %d claims, owner %s: %s', Answer::escapeControls($r->jobType), Answer::escapeControls($r->opKey),
                $r->token, $r->attempts, Answer::escapeControls($r->owner ?? '-'), Answer::escapeControls($r->error ?? '')));
        }
        if (!$rows && !$this->option('json')) {
            $this->line('nothing held');
        }
        return 0;
    }
}
