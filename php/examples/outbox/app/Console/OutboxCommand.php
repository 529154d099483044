<?php

namespace App\Console;

use App\Jobs\SendOutbox;
use Illuminate\Console\Command;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Schema;

/** `php artisan outbox:setup` creates the outbox table; `outbox:add TARGET BODY` queues one item and dispatches its job. */
class OutboxCommand extends Command
{
    protected $signature = 'outbox {action : setup or add} {target?} {body?}';
    protected $description = "The example's outbox";

    public function handle(): int
    {
        if ($this->argument('action') === 'setup') {
            if (!Schema::hasTable('outbox')) {
                Schema::create('outbox', function ($t) {
                    $t->id();
                    $t->string('target');
                    $t->text('body');
                    $t->string('status')->default('queued');
                    $t->string('external_id')->nullable();
                    $t->string('error')->nullable();
                });
            }
            $this->call('onceonly:migrate');
            return 0;
        }
        $id = DB::table('outbox')->insertGetId(['target' => $this->argument('target'), 'body' => $this->argument('body')]);
        SendOutbox::dispatch($id);
        $this->line((string) $id);
        return 0;
    }
}
