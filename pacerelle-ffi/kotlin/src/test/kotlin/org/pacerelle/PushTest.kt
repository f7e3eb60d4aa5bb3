package org.pacerelle

import com.sun.net.httpserver.HttpServer
import java.net.InetAddress
import java.net.InetSocketAddress
import java.util.Base64
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.pacerelle.core.Answer
import org.pacerelle.core.ItemKind
import org.pacerelle.core.ItemState
import org.pacerelle.core.Level
import org.pacerelle.core.QuestionKind
import org.pacerelle.core.QuestionState
import org.pacerelle.core.SubjectKind

/**
 * A push service on 127.0.0.1 (standing in for a UnifiedPush distributor's server): it records what the
 * relay POSTs and answers 201, as a push service does.
 */
class PushReceiver : AutoCloseable {
    class Push(val path: String, val contentEncoding: String?, val urgency: String?, val body: ByteArray)

    private val server = HttpServer.create(InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0)
    private val pushes = LinkedBlockingQueue<Push>()

    init {
        server.createContext("/") { exchange ->
            val body = exchange.requestBody.readAllBytes()
            val headers = exchange.requestHeaders
            pushes.put(Push(exchange.requestURI.path, headers.getFirst("Content-Encoding"), headers.getFirst("Urgency"), body))
            exchange.sendResponseHeaders(201, -1)
            exchange.close()
        }
        server.start()
    }

    /** The endpoint a subscription named [name] registers. */
    fun endpoint(name: String): String = "http://127.0.0.1:${server.address.port}/push/$name"

    /** The next push to [name]'s endpoint within [seconds]; null when none came. */
    fun next(name: String, seconds: Long = 30): Push? {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds)
        while (true) {
            val left = deadline - System.nanoTime()
            if (left <= 0) return null
            val push = pushes.poll(left, TimeUnit.NANOSECONDS) ?: return null
            if (push.path == "/push/$name") return push
        }
    }

    override fun close() = server.stop(0)
}

/**
 * Push through the Kotlin binding: the relay (started with `--allow-private-push-endpoints`) POSTs to a
 * subscription registered by `registerPush`; the body it sent, captured here, is opened by `openPush`.
 */
class PushTest {
    private fun unique(text: String) = "$text ${System.nanoTime()}"

    private fun b64(text: String): ByteArray = Base64.getUrlDecoder().decode(text)

    private fun PushReceiver.Push.opened(device: DeviceClient): ConversationItem =
        when (val event = device.openPush(body)) {
            is PushEvent.Item -> event.item
            is PushEvent.Fetch -> error("the push carried no item: $event")
        }

    @Test
    fun `a question pushed by the relay opens on the phone and is approved from it`() = runBlocking<Unit> {
        PushReceiver().use { receiver ->
            val phone = joinNewDevice("pushed phone")
            val before = phone.credentials()
            val keys = phone.registerPush(receiver.endpoint("phone"))
            assertEquals(65, b64(keys.p256dh).size)
            assertEquals(4.toByte(), b64(keys.p256dh)[0])
            assertEquals(16, b64(keys.auth).size)
            // The keys are in the credentials to store; registering the same endpoint again keeps them.
            val saved = phone.credentials()
            assertNotEquals(before, saved)
            assertEquals(keys, phone.registerPush(receiver.endpoint("phone")))
            assertEquals(saved, phone.credentials())

            val text = unique("Merge the release branch?")
            val ask = TestRelay.ask(text, "--details", "v2.4 to main", "--expires", "2m")
            val push = checkNotNull(receiver.next("phone")) { "the relay pushed the question" }
            assertEquals("aes128gcm", push.contentEncoding)
            assertEquals("high", push.urgency)
            // The push service sees ciphertext only.
            assertFalse(String(push.body, Charsets.ISO_8859_1).contains("release branch"))
            assertTrue(push.body.size <= 4096)

            val item = push.opened(phone)
            assertEquals(ItemKind.QUESTION, item.kind)
            assertEquals(text, item.text)
            val question = checkNotNull(item.question)
            assertEquals(text, question.question)
            assertEquals("v2.4 to main", question.details)
            assertEquals(QuestionKind.YES_NO, question.kind)
            assertEquals(QuestionState.PENDING, question.state)
            assertTrue(question.isOpen)

            // The credentials saved after registerPush open it in another process; those saved before cannot.
            val restored = DeviceClient.restore(saved)
            assertEquals(item, push.opened(restored))
            val unregistered = assertThrows<PacerelleException.PushRefused> {
                DeviceClient.restore(before).openPush(push.body)
            }
            assertEquals("push_not_registered", unregistered.code)

            // An altered body is refused, and so is a body sent to another device's subscription.
            val tampered = push.body.copyOf().also { it[it.size - 5] = (it[it.size - 5].toInt() xor 1).toByte() }
            assertEquals("push_undecryptable", assertThrows<PacerelleException.PushRefused> { phone.openPush(tampered) }.code)
            assertEquals("push_undecryptable", assertThrows<PacerelleException.PushRefused> { phone.openPush(ByteArray(0)) }.code)
            val tablet = joinNewDevice("other pushed tablet")
            tablet.registerPush(receiver.endpoint("tablet"))
            assertEquals("push_undecryptable", assertThrows<PacerelleException.PushRefused> { tablet.openPush(push.body) }.code)

            // Approve, as a notification action would, from the process that opened the push.
            val answered = restored.answer(question.questionId, Answer.Yes)
            assertEquals(QuestionState.ANSWERED, answered.state)
            assertTrue(ask.waitFor(60, TimeUnit.SECONDS), "pacerelle ask finished")
            val out = ask.inputStream.bufferedReader().readText()
            assertEquals(0, ask.exitValue(), out)
            assertTrue(Regex("\"approved\"\\s*:\\s*true").containsMatchIn(out), out)

            // The question closed: the relay pushes the update (same Topic), which dismisses the notification.
            val closing = checkNotNull(receiver.next("phone")) { "the relay pushed the closed question" }
            val update = closing.opened(phone)
            assertEquals(ItemKind.UPDATE, update.kind)
            val change = checkNotNull(update.update)
            assertEquals(question.questionId, change.subjectId)
            assertEquals(SubjectKind.QUESTION, change.subjectKind)
            assertEquals(ItemState.ANSWERED, change.state)
            assertEquals(phone.identity().deviceId, change.answeredBy)
            assertEquals("pushed phone", change.answeredByName)
            // This process opened the question from its push: the update brings it up to date.
            assertEquals(Answer.Yes, closing.opened(restored).update?.question?.answer)
        }
    }

    @Test
    fun `replies and notifications are pushed, and an unregistered endpoint gets nothing more`() = runBlocking<Unit> {
        PushReceiver().use { receiver ->
            val phone = joinNewDevice("notified by push")
            val endpoint = receiver.endpoint("replies")
            phone.registerPush(endpoint)

            val sent = phone.send("ping by push", null)
            val reply = checkNotNull(receiver.next("replies")) { "the relay pushed the echo reply" }.opened(phone)
            assertEquals(ItemKind.REPLY, reply.kind)
            assertEquals("echo: ping by push", reply.text)
            assertEquals(sent.messageId, reply.sourceMessageId)

            TestRelay.run("notify", "Deploy finished", "--title", "CI", "--level", "success", "--json")
            val notification = checkNotNull(receiver.next("replies")) { "the relay pushed the notification" }.opened(phone)
            assertEquals(ItemKind.NOTIFICATION, notification.kind)
            assertEquals("Deploy finished", notification.text)
            assertEquals("CI", notification.title)
            assertEquals(Level.SUCCESS, notification.level)

            phone.unregisterPush(endpoint)
            val forgotten = assertThrows<PacerelleException.PushRefused> {
                DeviceClient.restore(phone.credentials()).openPush(ByteArray(100))
            }
            assertEquals("push_not_registered", forgotten.code)
            phone.send("no push for this one", null)
            phone.awaitItem { it.kind == ItemKind.REPLY && it.text == "echo: no push for this one" }
            assertNull(receiver.next("replies", seconds = 3), "no push after unregisterPush")
        }
    }

    @Test
    fun `a question too large for a push says where to fetch it`() = runBlocking<Unit> {
        PushReceiver().use { receiver ->
            val phone = joinNewDevice("fetching phone")
            phone.registerPush(receiver.endpoint("large"))
            val text = unique("Apply this migration?")
            val details = "ALTER TABLE items ADD COLUMN note TEXT; -- ".repeat(120)
            val ask = TestRelay.ask(text, "--details", details, "--expires", "2m")
            try {
                val push = checkNotNull(receiver.next("large")) { "the relay pushed the large question" }
                assertTrue(push.body.size <= 4096)
                val fetch = phone.openPush(push.body) as? PushEvent.Fetch ?: error("expected a Fetch event")
                assertEquals(ItemKind.QUESTION, fetch.kind)
                // The conversation after `fetchFrom` starts with the item, opened as usual.
                val first = phone.conversation(fetch.fetchFrom).items.first()
                assertEquals(fetch.id, first.id)
                assertEquals(fetch.cursor, first.cursor)
                assertEquals(text, first.text)
                assertEquals(details, first.question?.details)
                // Denied from there: the agent's ask ends with a no.
                phone.answer(fetch.id, Answer.No)
                assertTrue(ask.waitFor(60, TimeUnit.SECONDS), "pacerelle ask finished")
                assertEquals(1, ask.exitValue())
            } finally {
                ask.destroy()
            }
        }
    }

    @Test
    fun `an endpoint refused keeps no keys`() = runBlocking<Unit> {
        val phone = joinNewDevice("refused endpoint")
        val before = phone.credentials()
        assertThrows<PacerelleException.InvalidInput> { phone.registerPush("not a url") }
        // Refused by the relay (an endpoint with credentials in it), with its code.
        val refused = assertThrows<PacerelleException.Relay> { phone.registerPush("https://user:pw@push.example/up") }
        assertEquals("invalid_input", refused.code)
        assertEquals(before, phone.credentials())
        assertEquals("push_not_registered", assertThrows<PacerelleException.PushRefused> { phone.openPush(ByteArray(200)) }.code)
    }
}
