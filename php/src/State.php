<?php

declare(strict_types=1);

namespace Onceonly;

/** The state of an operation record (docs/DESIGN.md section 1). */
enum State: string
{
    case Queued = 'queued';
    case Claimed = 'claimed';
    case Completed = 'completed';
    case Failed = 'failed';
    case Held = 'held';
    case Cancelled = 'cancelled';
}
