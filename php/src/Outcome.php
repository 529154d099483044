<?php

declare(strict_types=1);

namespace Onceonly;

/**
 * What became of one delivery (the machine's `finish` outcome):
 * done (by this delivery, or by an earlier one: `repeat`), in_progress
 * (another worker holds a live claim), held (a person resolves it), failed,
 * cancelled, retry_later (released: deliver it again after
 * `retryAfterMs`), not_due (queued, due later) or withdraw_failed.
 */
final class Outcome
{
    /** @param array<string, mixed> $fields the outcome's fields as the machine gives them */
    public function __construct(public readonly string $kind, public readonly array $fields)
    {
    }

    /** @param array<string, mixed> $outcome `['done' => [...]]` */
    public static function of(array $outcome): self
    {
        $kind = (string) array_key_first($outcome);
        return new self($kind, (array) $outcome[$kind]);
    }

    public function isDone(): bool
    {
        return $this->kind === 'done';
    }

    /** What the completed run returned (objects as arrays). */
    public function result(): mixed
    {
        $r = $this->fields['result'] ?? null;
        return is_object($r) || is_array($r) ? json_decode((string) json_encode($r), true) : $r;
    }

    public function externalRef(): ?string
    {
        return $this->fields['external_ref'] ?? null;
    }

    public function repeat(): bool
    {
        return (bool) ($this->fields['repeat'] ?? false);
    }

    /** A released delivery is due again after this (ms); an in-progress one's lease runs out after this. */
    public function retryAfterMs(): int
    {
        return match ($this->kind) {
            'retry_later' => (int) $this->fields['retry_after_ms'],
            'in_progress' => max(0, (int) $this->fields['lease_ms'] - (int) $this->fields['age_ms']),
            default => 0,
        };
    }

    /** Why (held, failed, retry_later), when the outcome says. */
    public function reason(): ?string
    {
        return $this->fields['reason'] ?? $this->fields['error'] ?? null;
    }

    public function __toString(): string
    {
        $why = $this->reason();
        return $this->kind . ($why !== null ? ": $why" : '');
    }
}
