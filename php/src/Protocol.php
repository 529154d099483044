<?php

declare(strict_types=1);

namespace Onceonly;

use Onceonly\Exception\InvalidInput;
use Onceonly\Store\OpMove;

/**
 * The transitions' rules as crates/onceonly/src/protocol defines them
 * (`Move::op`, `policy`); tests/Unit/ProtocolTest.php checks them against
 * protocol/transitions.json.
 */
final class Protocol
{
    /**
     * The fenced moves of the `move` statement: name => [from, to, refused
     * while a cancel is requested].
     */
    public const MOVES = [
        'complete' => [State::Claimed, State::Completed, true],
        'release' => [State::Claimed, State::Queued, true],
        'fail' => [State::Claimed, State::Failed, false],
        'hold' => [State::Claimed, State::Held, false],
        'cancel_claimed' => [State::Claimed, State::Cancelled, false],
        'complete_withdraw_failed' => [State::Claimed, State::Completed, false],
        'cancel_queued' => [State::Queued, State::Cancelled, false],
        'hold_queued' => [State::Queued, State::Held, false],
        'cancel_failed' => [State::Failed, State::Cancelled, false],
        'cancel_completed' => [State::Completed, State::Cancelled, false],
        'resolve_completed' => [State::Held, State::Completed, false],
        'resolve_queued' => [State::Held, State::Queued, false],
        'resolve_failed' => [State::Held, State::Failed, false],
        'resolve_cancelled' => [State::Held, State::Cancelled, false],
    ];

    /** Where a take-over's settle (redo, hold, fail) moves a stale claim. */
    public const TAKE_OVER_TO = ['redo' => State::Claimed, 'hold' => State::Held, 'fail' => State::Failed];

    /** The statement parameters of move $name, from its rule; callers add only the values. */
    public static function move(
        string $name,
        string $job,
        string $key,
        int $token,
        ?string $externalRef = null,
        ?string $result = null,
        ?string $error = null,
        ?int $retryAfterMs = null,
    ): OpMove {
        $rule = self::MOVES[$name] ?? throw new InvalidInput("no move named $name");
        return new OpMove($job, $key, $token, $rule[0], $rule[1], $rule[2], $externalRef, $result, $error, $retryAfterMs);
    }
}
