<?php

use Illuminate\Database\Migrations\Migration;
use Onceonly\Laravel\Records;

/**
 * onceonly's tables, by `php artisan migrate`: the same migrations every
 * client applies (php/sql/, from the Rust stores), with their own
 * bookkeeping, so running them again, or from the CLI, Python or Ruby,
 * changes nothing. down() leaves them: they hold the operations' history.
 */
return new class extends Migration
{
    public function up(): void
    {
        app(Records::class)->store(config('onceonly.connection'))->migrate();
    }

    public function down(): void
    {
    }
};
