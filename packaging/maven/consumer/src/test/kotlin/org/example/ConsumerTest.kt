package org.example

import java.time.Duration
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import org.pacerelle.ConversationItem
import org.pacerelle.DeviceClient
import org.pacerelle.core.ItemKind

/** Pairs with the agent of `PACERELLE_PAIRING_LINK` (an echo agent), sends a task and reads the reply. */
class ConsumerTest {
    @Test
    fun `pairs by link and gets the echo agent's reply`() = runBlocking<Unit> {
        val link = System.getenv("PACERELLE_PAIRING_LINK") ?: error("set PACERELLE_PAIRING_LINK")
        val device = DeviceClient.join(link, "maven consumer")
        val sent = device.send("hello from maven", null)
        val reply = withTimeout(30_000) {
            var cursor: String? = null
            var found: ConversationItem? = null
            while (found == null) {
                val page = device.waitForEvents(cursor = cursor, timeout = Duration.ofSeconds(5))
                found = page.items.firstOrNull { it.kind == ItemKind.REPLY && it.sourceMessageId == sent.messageId }
                cursor = page.cursor
            }
            found
        }
        assertEquals("echo: hello from maven", reply.text)
    }
}
