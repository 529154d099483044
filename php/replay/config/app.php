<?php
return [
    'name' => 'onceonly-replay',
    'env' => 'testing',
    'debug' => true,
    'timezone' => 'UTC',
    'key' => 'base64:' . base64_encode(str_repeat('k', 32)),
    'cipher' => 'AES-256-CBC',
    'providers' => [
        Illuminate\Bus\BusServiceProvider::class,
        Illuminate\Cache\CacheServiceProvider::class,
        Illuminate\Foundation\Providers\ConsoleSupportServiceProvider::class,
        Illuminate\Database\DatabaseServiceProvider::class,
        Illuminate\Encryption\EncryptionServiceProvider::class,
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        Illuminate\Pipeline\PipelineServiceProvider::class,
        Illuminate\Queue\QueueServiceProvider::class,
        Illuminate\Redis\RedisServiceProvider::class,
        Onceonly\Laravel\OnceonlyServiceProvider::class,
    ],
    'aliases' => [],
];
