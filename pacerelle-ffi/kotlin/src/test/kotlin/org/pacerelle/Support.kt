package org.pacerelle

import java.time.Duration
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.withTimeout

/** Joins the test relay's agent as a new device. */
suspend fun joinNewDevice(name: String): DeviceClient = DeviceClient.join(TestRelay.pairingLink(), name)

/**
 * Follows the conversation after [cursor] with `waitForEvents` until an item matches, and returns it.
 */
suspend fun DeviceClient.awaitItem(
    cursor: String? = null,
    timeoutMs: Long = 30_000,
    matches: (ConversationItem) -> Boolean,
): ConversationItem = withTimeout(timeoutMs) {
    var next = cursor
    while (true) {
        val page = waitForEvents(cursor = next, timeout = Duration.ofSeconds(5))
        page.items.firstOrNull(matches)?.let { return@withTimeout it }
        next = page.cursor
    }
    @Suppress("UNREACHABLE_CODE")
    error("unreachable")
}

/** Polls the pending questions until one has this text. */
suspend fun DeviceClient.awaitQuestion(text: String, timeoutMs: Long = 30_000): Question = withTimeout(timeoutMs) {
    while (true) {
        pendingQuestions().firstOrNull { it.question == text }?.let { return@withTimeout it }
        kotlinx.coroutines.delay(100)
    }
    @Suppress("UNREACHABLE_CODE")
    error("unreachable")
}

/** A listener that queues what it receives, as an app would hand it to its UI thread. */
class QueueListener : ConversationListener {
    val items = LinkedBlockingQueue<ConversationItem>()
    val errors = LinkedBlockingQueue<Pair<PacerelleException, Boolean>>()

    override fun onItem(item: ConversationItem) {
        items.put(item)
    }

    override fun onError(error: PacerelleException, willRetry: Boolean) {
        errors.put(error to willRetry)
    }

    /** The next item matching, within [seconds]; null when none came. */
    fun next(seconds: Long = 30, matches: (ConversationItem) -> Boolean = { true }): ConversationItem? {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds)
        while (true) {
            val left = deadline - System.nanoTime()
            if (left <= 0) return null
            val item = items.poll(left, TimeUnit.NANOSECONDS) ?: return null
            if (matches(item)) return item
        }
    }
}
