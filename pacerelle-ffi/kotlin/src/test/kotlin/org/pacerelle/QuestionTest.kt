package org.pacerelle

import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.pacerelle.core.Answer
import org.pacerelle.core.Channel
import org.pacerelle.core.ItemKind
import org.pacerelle.core.ItemState
import org.pacerelle.core.Level
import org.pacerelle.core.QuestionKind
import org.pacerelle.core.QuestionState

/**
 * Questions asked by the agent (`pacerelle ask`, which exits 0 when the answer approves) and answered
 * through the Kotlin binding; notifications sent by `pacerelle notify`.
 */
class QuestionTest {
    private fun unique(text: String) = "$text ${System.nanoTime()}"

    /** Waits for `pacerelle ask` to finish; returns its exit status and output. */
    private fun finished(ask: Process): Pair<Int, String> {
        assertTrue(ask.waitFor(60, TimeUnit.SECONDS), "pacerelle ask finished")
        return ask.exitValue() to ask.inputStream.bufferedReader().readText()
    }

    @Test
    fun `a yes answered here is approved on the agent side`() = runBlocking<Unit> {
        val device = joinNewDevice("deciding phone")
        val other = joinNewDevice("second phone")
        val text = unique("Deploy?")
        val ask = TestRelay.ask(text, "--details", "to production", "--expires", "2m")

        val question = device.awaitQuestion(text)
        assertEquals(QuestionKind.YES_NO, question.kind)
        assertEquals(QuestionState.PENDING, question.state)
        assertEquals("to production", question.details)
        assertTrue(question.isOpen)
        assertTrue(question.expiresAt.isAfter(question.createdAt))
        // The same question, opened, in the conversation.
        val item = device.awaitItem { it.kind == ItemKind.QUESTION && it.id == question.questionId }
        assertEquals(text, item.text)
        assertEquals(question.questionId, item.question?.questionId)

        assertThrows<PacerelleException.InvalidInput> { device.answer(question.questionId, Answer.Text("ok")) }
        val answered = device.answer(question.questionId, Answer.Yes)
        assertEquals(QuestionState.ANSWERED, answered.state)
        assertEquals(device.identity().deviceId, answered.answeredBy)
        assertEquals(Channel.PHONE, answered.channel)
        assertFalse(answered.isOpen)

        val (status, out) = finished(ask)
        assertEquals(0, status, out)
        assertTrue(Regex("\"approved\"\\s*:\\s*true").containsMatchIn(out), out)

        // The first answer won: the other device learns it is closed.
        val closed = assertThrows<PacerelleException.QuestionClosed> {
            other.answer(question.questionId, Answer.No)
        }
        assertEquals(QuestionState.ANSWERED, closed.state)
        assertEquals(Channel.PHONE, closed.channel)
        assertTrue(other.pendingQuestions().none { it.questionId == question.questionId })
        assertEquals(
            QuestionState.ANSWERED,
            other.questions(QuestionState.ANSWERED).single { it.questionId == question.questionId }.state,
        )
    }

    @Test
    fun `an answer that does not count says which one does`() = runBlocking<Unit> {
        val phone = joinNewDevice("Ana's phone")
        val tablet = joinNewDevice("Bob's tablet")
        // The same phone in another process, which read the question while it was pending.
        val phoneElsewhere = DeviceClient.restore(phone.credentials())
        val text = unique("Ship it?")
        val ask = TestRelay.ask(text, "--expires", "2m")
        val question = phone.awaitQuestion(text)
        tablet.awaitQuestion(text)
        phoneElsewhere.awaitQuestion(text)

        val answered = phone.answer(question.questionId, Answer.Yes)
        assertEquals(Answer.Yes, answered.answer)
        assertEquals("Ana's phone", answered.answeredByName)
        val (status, out) = finished(ask)
        assertEquals(0, status, out)

        // Another device: closed, with the yes that counts, never the refused no.
        val fromTablet = assertThrows<PacerelleException.QuestionClosed> {
            tablet.answer(question.questionId, Answer.No)
        }
        assertEquals(QuestionState.ANSWERED, fromTablet.state)
        assertEquals(Answer.Yes, fromTablet.answer)
        assertEquals(phone.identity().deviceId, fromTablet.answeredBy)
        assertEquals("Ana's phone", fromTablet.answeredByName)
        assertEquals(answered.answeredAt, fromTablet.answeredAt)
        assertFalse(fromTablet.byThisDevice)

        // The same device with another answer: closed too, with its own first answer.
        for (same in listOf(phone, phoneElsewhere)) {
            val fromPhone = assertThrows<PacerelleException.QuestionClosed> {
                same.answer(question.questionId, Answer.No)
            }
            assertEquals(QuestionState.ANSWERED, fromPhone.state)
            assertEquals(Answer.Yes, fromPhone.answer)
            assertTrue(fromPhone.byThisDevice)
        }
        // The same answer again is a retry, and succeeds.
        assertEquals(Answer.Yes, phoneElsewhere.answer(question.questionId, Answer.Yes).answer)
        // Read by the tablet, the question shows the answer that counts and who gave it.
        val seen = tablet.questions(QuestionState.ANSWERED).single { it.questionId == question.questionId }
        assertEquals(Answer.Yes, seen.answer)
        assertEquals("Ana's phone", seen.answeredByName)
    }

    @Test
    fun `options and text answers reach the agent`() = runBlocking<Unit> {
        val device = joinNewDevice("choosing phone")
        val which = unique("Which region?")
        val askChoice = TestRelay.ask(which, "--choice", "eu-west", "--choice", "us-east")
        val choice = device.awaitQuestion(which)
        assertEquals(QuestionKind.CHOICE, choice.kind)
        assertEquals(listOf("eu-west", "us-east"), choice.options)
        assertFalse(choice.multiple)
        device.answer(choice.questionId, Answer.Options(listOf("us-east")))
        val (choiceStatus, choiceOut) = finished(askChoice)
        assertEquals(0, choiceStatus, choiceOut)
        assertTrue(choiceOut.contains("us-east"), choiceOut)

        val why = unique("Commit message?")
        val askText = TestRelay.ask(why, "--text")
        val question = device.awaitQuestion(why)
        assertEquals(QuestionKind.TEXT, question.kind)
        device.answer(question.questionId, Answer.Text("fix: the flaky test"))
        val (textStatus, textOut) = finished(askText)
        assertEquals(0, textStatus, textOut)
        assertTrue(textOut.contains("fix: the flaky test"), textOut)
    }

    @Test
    fun `a no is not approved`() = runBlocking<Unit> {
        val device = joinNewDevice("refusing phone")
        val text = unique("Delete the branch?")
        val ask = TestRelay.ask(text)
        device.answer(device.awaitQuestion(text).questionId, Answer.No)
        assertEquals(1, finished(ask).first)
    }

    @Test
    fun `a cancelled question is closed`() = runBlocking<Unit> {
        val device = joinNewDevice("late phone")
        val text = unique("Still needed?")
        val ask = TestRelay.ask(text, "--id", "q_kotlin_${System.nanoTime()}")
        val question = device.awaitQuestion(text)
        TestRelay.run("cancel", question.questionId, "--json")
        assertEquals(2, finished(ask).first)
        val closed = assertThrows<PacerelleException.QuestionClosed> {
            device.answer(question.questionId, Answer.Yes)
        }
        assertEquals(QuestionState.CANCELLED, closed.state)
        assertEquals(null, closed.answer)
        assertNull(closed.channel)
    }

    @Test
    fun `an answer given at the computer shows as such`() = runBlocking<Unit> {
        val device = joinNewDevice("watching phone")
        val start = device.conversation(null).cursor
        val text = unique("Restart the service?")
        // `--here` asks at the computer too, and the question accepts an answer given there.
        val ask = TestRelay.ask(text, "--here", "--expires", "2m")
        val question = device.awaitQuestion(text)
        assertNull(question.channel)
        ask.outputStream.bufferedWriter().use { it.write("yes\n") }
        val (status, out) = finished(ask)
        assertEquals(0, status, out)

        // The update says how it was answered: at the computer, by no device.
        val update = device.awaitItem(start) {
            it.kind == ItemKind.UPDATE && it.update?.subjectId == question.questionId
        }.update!!
        assertEquals(ItemState.ANSWERED, update.state)
        assertEquals(Channel.HOST, update.channel)
        assertNull(update.answeredBy)
        // So does the question read again, with the answer that counts.
        val seen = device.questions(QuestionState.ANSWERED).single { it.questionId == question.questionId }
        assertEquals(Channel.HOST, seen.channel)
        assertNull(seen.answeredBy)
        assertEquals(Answer.Yes, seen.answer)
        // The phone's own answer comes too late.
        val closed = assertThrows<PacerelleException.QuestionClosed> {
            device.answer(question.questionId, Answer.No)
        }
        assertEquals(QuestionState.ANSWERED, closed.state)
        assertEquals(Channel.HOST, closed.channel)
        assertEquals(Answer.Yes, closed.answer)
        assertNull(closed.answeredBy)
        assertFalse(closed.byThisDevice)
    }

    @Test
    fun `notifications arrive with their title and level`() = runBlocking<Unit> {
        val device = joinNewDevice("notified phone")
        val start = device.conversation(null).cursor
        TestRelay.run("notify", "Build passed", "--title", "CI", "--level", "success", "--json")
        val item = device.awaitItem(start) { it.kind == ItemKind.NOTIFICATION && it.text == "Build passed" }
        assertEquals("CI", item.title)
        assertEquals(Level.SUCCESS, item.level)
    }
}
