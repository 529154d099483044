<?php

declare(strict_types=1);

namespace Onceonly;

/** Who holds a claim: host, process id and a random part, as every client names its workers. */
final class Owner
{
    public static function name(): string
    {
        return sprintf('%s:%d:%s', gethostname() ?: 'host', getmypid(), bin2hex(random_bytes(4)));
    }
}
