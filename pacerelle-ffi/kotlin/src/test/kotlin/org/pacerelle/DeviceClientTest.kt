package org.pacerelle

import java.time.Duration
import java.time.Instant
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.pacerelle.core.ItemKind
import org.pacerelle.core.ItemState
import org.pacerelle.core.MessageState
import org.pacerelle.core.Activity
import org.pacerelle.core.Presence
import org.pacerelle.core.SubjectKind

/**
 * The Kotlin binding against a real relay and the echo agent. These tests check the binding — suspend
 * functions, records, enums, errors, the listener — not the client's logic, which Rust tests cover.
 */
class DeviceClientTest {
    @Test
    fun `joins by link, sends a task and receives the echo reply`() = runBlocking<Unit> {
        val device = joinNewDevice("Ana's phone")
        val identity = device.identity()
        assertEquals(TestRelay.relayUrl, identity.relayUrl)
        assertEquals(TestRelay.agentId, identity.agentId)
        assertEquals("kotlin tests", identity.agentName)
        assertEquals("owner", identity.role)
        assertTrue(device.credentials().startsWith("pcrdev1_"))

        val sent = device.send("hello from kotlin", null)
        assertTrue(sent.created)
        assertTrue(sent.messageId.isNotEmpty())
        assertTrue(sent.createdAt.isAfter(Instant.now().minusSeconds(60)))

        val reply = device.awaitItem { it.kind == ItemKind.REPLY && it.sourceMessageId == sent.messageId }
        assertEquals("echo: hello from kotlin", reply.text)

        // The task itself is in the conversation, processed by the agent.
        val task = device.awaitItem { it.kind == ItemKind.MESSAGE && it.id == sent.messageId }
        assertEquals("hello from kotlin", task.text)
        assertNotNull(task.state)
    }

    @Test
    fun `send is idempotent by message id`() = runBlocking<Unit> {
        val device = joinNewDevice("retrying phone")
        val id = "msg_kotlin_${System.nanoTime()}"
        val first = device.send("only once", id)
        val again = device.send("only once", id)
        assertEquals(id, first.messageId)
        assertTrue(first.created)
        assertFalse(again.created)
        assertEquals(first.cursor, again.cursor)
    }

    @Test
    fun `conversation pages after a cursor and waits with a timeout`() = runBlocking<Unit> {
        val device = joinNewDevice("paging phone")
        val sent = device.send("page me", null)
        device.awaitItem { it.kind == ItemKind.REPLY && it.sourceMessageId == sent.messageId }
        // The agent marks the task processed after replying: the last item is that update.
        val processed = device.awaitItem { it.kind == ItemKind.UPDATE && it.update?.subjectId == sent.messageId }
        assertEquals(ItemState.PROCESSED, processed.update?.state)
        assertEquals(SubjectKind.MESSAGE, processed.update?.subjectKind)

        val all = device.conversation(cursor = null)
        assertTrue(all.items.any { it.id == sent.messageId })
        assertTrue(all.rejected.isEmpty())
        // Nothing after the end: the wait returns empty at the same position once the timeout passes.
        val started = System.nanoTime()
        val empty = device.waitForEvents(all.cursor, Duration.ofSeconds(1))
        assertTrue(empty.items.isEmpty())
        assertEquals(all.cursor, empty.cursor)
        assertTrue(System.nanoTime() - started >= TimeUnit.MILLISECONDS.toNanos(900))
        // A parked wait is cancelled with its coroutine, long before its own timeout.
        val cancelledAt = System.nanoTime()
        assertNull(withTimeoutOrNull(300) { device.waitForEvents(all.cursor, Duration.ofSeconds(30)) })
        assertTrue(System.nanoTime() - cancelledAt < TimeUnit.SECONDS.toNanos(5))
        // Reading after an item's cursor skips it and what came before.
        val firstCursor = all.items.first().cursor
        assertTrue(device.conversation(cursor = firstCursor).items.none { it.cursor == firstCursor })
    }

    @Test
    fun `restored credentials keep working`() = runBlocking<Unit> {
        val credentials = joinNewDevice("stored phone").credentials()
        // As after an app restart: a new object from the stored string.
        val restored = DeviceClient.restore(credentials)
        assertEquals(credentials, restored.credentials())
        val sent = restored.send("after restore", null)
        val reply = restored.awaitItem { it.kind == ItemKind.REPLY && it.sourceMessageId == sent.messageId }
        assertEquals("echo: after restore", reply.text)
    }

    @Test
    fun `presence of the agent`() = runBlocking<Unit> {
        val device = joinNewDevice("watching phone")
        // The echo agent may still be starting when this test runs first.
        val status = withTimeout(20_000) {
            var status = device.status()
            while (status.presence == Presence.OFFLINE) {
                delay(100)
                status = device.status()
            }
            status
        }
        assertEquals(TestRelay.agentId, status.agentId)
        assertEquals("kotlin tests", status.agentName)
        assertEquals("echo-agent", status.sessionHost)
        assertTrue(status.devices >= 1uL)
        // The word every surface shows: the echo agent waits for tasks and asks nothing.
        assertTrue(status.activity == Activity.LISTENING || status.activity == Activity.WORKING, "${status.activity}")
        assertEquals(0uL, status.openQuestions)
    }

    @Test
    fun `sessions are listed, and a task goes to the session named`() = runBlocking<Unit> {
        val device = joinNewDevice("sessions phone")
        val status = withTimeout(20_000) {
            var status = device.status()
            while (status.sessions.isEmpty()) {
                delay(100)
                status = device.status()
            }
            status
        }
        // The echo agent names no session: it is the default one.
        val echo = status.sessions.single()
        assertEquals("default", echo.name)
        assertEquals("echo-agent", echo.host)
        assertTrue(echo.since.isBefore(Instant.now().plusSeconds(1)))

        val sent = device.sendTo("to the default session", null, "default")
        val reply = device.awaitItem { it.kind == ItemKind.REPLY && it.sourceMessageId == sent.messageId }
        assertEquals("echo: to the default session", reply.text)

        // A session nobody runs: the task waits for it, never handed to the echo agent.
        val parked = device.sendTo("for the CI session", null, "ci")
        val after = device.sendTo("to any session", null, null)
        device.awaitItem { it.kind == ItemKind.REPLY && it.sourceMessageId == after.messageId }
        val waiting = device.awaitItem { it.kind == ItemKind.MESSAGE && it.id == parked.messageId }
        assertEquals(MessageState.SENT, waiting.state)
        assertThrows<PacerelleException.InvalidInput> { device.sendTo("bad", null, "any") }
    }

    @Test
    fun `errors map to the variants an app branches on`() = runBlocking<Unit> {
        val bad = assertThrows<PacerelleException.InvalidInput> {
            DeviceClient.join("https://example.invalid/not-a-pairing-link", "phone")
        }
        assertTrue(bad.reason.isNotEmpty())
        assertThrows<PacerelleException.InvalidInput> { DeviceClient.join(TestRelay.pairingLink(), " ") }
        assertThrows<PacerelleException.InvalidInput> { DeviceClient.restore("not credentials") }

        val link = TestRelay.pairingLink()
        val device = DeviceClient.join(link, "first")
        val used = assertThrows<PacerelleException.Relay> { DeviceClient.join(link, "second") }
        assertEquals("pairing_claimed", used.code)
        assertEquals(409, used.status.toInt())

        assertThrows<PacerelleException.InvalidInput> { device.send("", null) }
        assertThrows<PacerelleException.InvalidInput> { device.send("x", "not a valid id!") }
        assertThrows<PacerelleException.InvalidInput> { device.conversation("not a cursor") }

        // A relay nobody answers at: the link's relay address replaced by a closed port.
        val offline = TestRelay.pairingLink().replace(TestRelay.relayUrl, "http://127.0.0.1:9")
        assertThrows<PacerelleException.Network> { DeviceClient.join(offline, "phone") }
    }

    @Test
    fun `a revoked device fails with NotPaired, also when restored`() = runBlocking<Unit> {
        val device = joinNewDevice("lost phone")
        val credentials = device.credentials()
        TestRelay.revoke(device.identity().deviceId)
        assertThrows<PacerelleException.NotPaired> { device.send("still there?", null) }
        assertThrows<PacerelleException.NotPaired> { DeviceClient.restore(credentials).status() }
    }

    @Test
    fun `leave revokes this device`() = runBlocking<Unit> {
        val device = joinNewDevice("leaving phone")
        device.leave()
        assertThrows<PacerelleException.NotPaired> { device.conversation(null) }
    }

    @Test
    fun `the listener delivers events and stops`() = runBlocking<Unit> {
        val device = joinNewDevice("listening phone")
        val listener = QueueListener()
        val handle = device.listen(cursor = null, listener = listener)
        assertFalse(handle.isStopped())

        val sent = device.send("live", null)
        val reply = listener.next { it.kind == ItemKind.REPLY && it.sourceMessageId == sent.messageId }
        assertNotNull(reply, "the listener received the reply")
        assertEquals("echo: live", reply!!.text)

        handle.stop()
        assertTrue(handle.isStopped())
        listener.items.clear()
        val unheard = device.send("nobody listens", null)
        device.awaitItem(reply.cursor) { it.kind == ItemKind.REPLY && it.sourceMessageId == unheard.messageId }
        assertNull(listener.next(seconds = 2), "no event after stop")
        assertTrue(listener.errors.isEmpty())
    }

    @Test
    fun `the listener reports NotPaired and stops by itself`() = runBlocking<Unit> {
        val device = joinNewDevice("revoked phone")
        TestRelay.revoke(device.identity().deviceId)
        val listener = QueueListener()
        val handle = device.listen(null, listener)
        val (error, willRetry) = listener.errors.poll(30, TimeUnit.SECONDS) ?: error("no error reported")
        assertTrue(error is PacerelleException.NotPaired, "got $error")
        assertFalse(willRetry)
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
        while (!handle.isStopped() && System.nanoTime() < deadline) Thread.sleep(20)
        assertTrue(handle.isStopped())
        assertTrue(listener.items.isEmpty())
    }
}
