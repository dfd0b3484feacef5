import Foundation

/// What a test's forked child does first so that a hang ends it instead of the test run.
public enum ForkedChild {
    /// Ends the calling (forked) process with SIGALRM after `seconds`: unblocks SIGALRM in the
    /// calling thread (the threads tests run on block most signals, and a child inherits the
    /// mask of the thread that forked it, so a bare `alarm` would never fire) and arms the alarm.
    /// The parent's `waitpid` then sees a signal status instead of waiting forever.
    public static func armTimeout(seconds: UInt32) {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGALRM)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
        signal(SIGALRM, SIG_DFL)
        alarm(seconds)
    }
}
