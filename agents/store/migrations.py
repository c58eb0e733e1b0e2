"""The store's schema, one SQL script per version, applied in order by `Store.open`."""

# Each entry is one schema version; never edit an applied migration, append a new one.
MIGRATIONS: list[str] = [
    # 1: conversations, proposals, tasks, events, audit, usage
    """
    CREATE TABLE chats (
        id INTEGER PRIMARY KEY,
        conversation_started_at TEXT,
        created_at TEXT NOT NULL
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        input_method TEXT NOT NULL DEFAULT 'text',
        tokens INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_chat ON messages(chat_id, id);
    CREATE TABLE proposals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        workspace TEXT NOT NULL,
        request TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        supersedes INTEGER,
        task_id INTEGER,
        created_at TEXT NOT NULL,
        decided_at TEXT
    );
    CREATE INDEX proposals_chat ON proposals(chat_id, status);
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        workspace TEXT NOT NULL,
        worker TEXT NOT NULL,
        title TEXT NOT NULL,
        instructions TEXT NOT NULL,
        status TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        background INTEGER NOT NULL DEFAULT 1,
        proposal_id INTEGER,
        branch TEXT,
        base_branch TEXT,
        base_commit TEXT,
        worktree TEXT,
        commit_sha TEXT,
        result TEXT,
        error TEXT,
        reply_to_message_id INTEGER,
        progress_message_id INTEGER,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT
    );
    CREATE INDEX tasks_status ON tasks(status, priority, id);
    CREATE INDEX tasks_chat ON tasks(chat_id, id);
    CREATE TABLE task_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE INDEX task_events_task ON task_events(task_id, id);
    CREATE TABLE tool_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER,
        task_id INTEGER,
        agent TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        result_chars INTEGER NOT NULL DEFAULT 0,
        duration_ms INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX tool_calls_task ON tool_calls(task_id, id);
    CREATE TABLE usage (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER,
        task_id INTEGER,
        agent TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE INDEX usage_time ON usage(created_at);
    CREATE INDEX usage_task ON usage(task_id);
    """,
    # 2: acceptance criteria of tasks; compacted summaries of long conversations
    """
    CREATE TABLE task_criteria (
        task_id INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        text TEXT NOT NULL,
        verified INTEGER NOT NULL DEFAULT 0,
        evidence TEXT,
        PRIMARY KEY (task_id, idx)
    );
    CREATE TABLE conversation_notes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        up_to_message_id INTEGER NOT NULL,
        summary TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX conversation_notes_chat ON conversation_notes(chat_id, id);
    """,
    # 3: repo map (agents/repo_map/maps.py): per-workspace index of files, their symbols and import edges
    """
    CREATE TABLE repo_indexes (
        workspace TEXT PRIMARY KEY,
        root TEXT NOT NULL,
        git_head TEXT,
        refreshed_at TEXT NOT NULL
    );
    CREATE TABLE repo_files (
        workspace TEXT NOT NULL,
        path TEXT NOT NULL,
        mtime_ns INTEGER NOT NULL,
        size INTEGER NOT NULL,
        language TEXT,
        git_head TEXT,
        summary TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (workspace, path)
    ) WITHOUT ROWID;
    CREATE TABLE repo_symbols (
        workspace TEXT NOT NULL,
        path TEXT NOT NULL,
        name TEXT NOT NULL COLLATE NOCASE,
        kind TEXT NOT NULL,
        line INTEGER NOT NULL,
        signature TEXT NOT NULL,
        parent TEXT
    );
    CREATE INDEX repo_symbols_file ON repo_symbols(workspace, path);
    CREATE INDEX repo_symbols_name ON repo_symbols(workspace, name);
    CREATE TABLE repo_imports (
        workspace TEXT NOT NULL,
        path TEXT NOT NULL,
        target TEXT NOT NULL
    );
    CREATE INDEX repo_imports_file ON repo_imports(workspace, path);
    CREATE INDEX repo_imports_target ON repo_imports(workspace, target);
    """,
    # 4: photos and files sent with a message (bytes in files under the data folder), and those handed to a task
    """
    CREATE TABLE attachments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        message_id INTEGER,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        media_type TEXT NOT NULL,
        path TEXT NOT NULL,
        size INTEGER NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE INDEX attachments_message ON attachments(message_id);
    CREATE TABLE task_attachments (
        task_id INTEGER NOT NULL,
        attachment_id INTEGER NOT NULL,
        save_as_file INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (task_id, attachment_id)
    );
    """,
    # 5: proposals and task summaries the bot showed are turns of the chat; replies can point at them
    """
    ALTER TABLE messages ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat';
    ALTER TABLE messages ADD COLUMN ref_id INTEGER;
    ALTER TABLE messages ADD COLUMN platform_message_id INTEGER;
    CREATE INDEX messages_platform ON messages(chat_id, platform_message_id);
    """,
    # 6: deliveries (store/delivery.py): every summary, proposal and answer the bot must show, kept until
    # Telegram took it (delivered_at) so a 5xx or a restart never loses it; /task N re-sends the last one of a task
    """
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        task_id INTEGER,
        text TEXT NOT NULL,
        buttons TEXT,
        reply_to INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        created_at TEXT NOT NULL,
        delivered_at TEXT
    );
    CREATE INDEX deliveries_undelivered ON deliveries(delivered_at, id);
    CREATE INDEX deliveries_task ON deliveries(task_id, id);
    """,
    # 7: repo map ranking: content hashes (a fresh worktree re-parses nothing unchanged), and each
    # file's referenced identifiers and words as JSON objects (name → uses) for the definition/reference graph
    """
    ALTER TABLE repo_files ADD COLUMN content_hash TEXT NOT NULL DEFAULT '';
    ALTER TABLE repo_files ADD COLUMN refs TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE repo_files ADD COLUMN words TEXT NOT NULL DEFAULT '{}';
    """,
    # 8: a photo or file the Messages API refused (why, in its words): left out of every later request,
    # so one unreadable PDF no longer fails each turn of the chat until /new
    """
    ALTER TABLE attachments ADD COLUMN refused TEXT;
    """,
    # 9: a team in one group: who started a task and whose API calls cost what (owners and members), the
    # topics of forum groups (each its own conversation), and the workspace a conversation is bound to
    """
    ALTER TABLE tasks ADD COLUMN user_id INTEGER;
    ALTER TABLE tasks ADD COLUMN user_name TEXT;
    ALTER TABLE usage ADD COLUMN user_id INTEGER;
    CREATE TABLE topics (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        thread_id INTEGER NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        UNIQUE (chat_id, thread_id)
    );
    CREATE TABLE conversation_workspaces (
        conversation INTEGER PRIMARY KEY,
        workspace TEXT NOT NULL,
        bound_at TEXT NOT NULL
    );
    """,
    # 10: repo-map indexes no query uses (imports are read by workspace; a symbol search is `LIKE '%…%'`,
    # which no index serves): a cold build of sympy wrote 82k index entries for nothing
    """
    DROP INDEX IF EXISTS repo_imports_target;
    DROP INDEX IF EXISTS repo_symbols_name;
    """,
    # schedules: work that starts by itself (agents/work/schedule_book.py), each run a task that names its schedule
    """
    CREATE TABLE schedules (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        user_id INTEGER,
        user_name TEXT,
        workspace TEXT NOT NULL,
        worker TEXT NOT NULL,
        instructions TEXT NOT NULL,
        cron TEXT,
        at TEXT,
        every_minutes INTEGER,
        status TEXT NOT NULL,
        note TEXT,
        next_run_at TEXT,
        last_run_at TEXT,
        last_task_id INTEGER,
        created_at TEXT NOT NULL
    );
    CREATE INDEX schedules_chat ON schedules(chat_id, status);
    ALTER TABLE tasks ADD COLUMN schedule_id INTEGER;
    """,
    # standing notes (a user's "remember that …", for one workspace or all) and the questions workers ask the user
    # (ask_user): both outlive a restart; an open question of a task interrupted meanwhile stays answerable
    """
    CREATE TABLE standing_notes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id INTEGER,
        user_name TEXT,
        workspace TEXT,
        text TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX standing_notes_user ON standing_notes(user_id);
    CREATE TABLE asked_questions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id INTEGER NOT NULL,
        chat_id INTEGER NOT NULL,
        user_id INTEGER,
        user_name TEXT,
        question TEXT NOT NULL,
        options TEXT NOT NULL DEFAULT '[]',
        message_id INTEGER,
        status TEXT NOT NULL,
        answer TEXT,
        answered_by INTEGER,
        asked_at TEXT NOT NULL,
        answered_at TEXT
    );
    CREATE INDEX asked_questions_task ON asked_questions(task_id, status);
    CREATE INDEX asked_questions_message ON asked_questions(chat_id, message_id);
    """,
    # GitHub: a task's pull request (one per task, reused by its later commits), the webhook deliveries (stored before
    # they are acknowledged, de-duplicated by GitHub's delivery id) and the GitHub threads that started a task (the
    # bot answers there when it ends)
    """
    CREATE TABLE github_pull_requests (
        task_id INTEGER PRIMARY KEY,
        repository TEXT NOT NULL,
        number INTEGER NOT NULL,
        url TEXT NOT NULL,
        branch TEXT NOT NULL,
        draft INTEGER NOT NULL DEFAULT 0,
        pushed_sha TEXT NOT NULL DEFAULT '',
        checks_reported_sha TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX github_pull_requests_number ON github_pull_requests(repository, number);
    CREATE TABLE github_deliveries (
        id TEXT PRIMARY KEY,
        event TEXT NOT NULL,
        payload TEXT NOT NULL,
        received_at TEXT NOT NULL,
        handled_at TEXT
    );
    CREATE TABLE github_threads (
        task_id INTEGER PRIMARY KEY,
        repository TEXT NOT NULL,
        number INTEGER NOT NULL,
        login TEXT NOT NULL,
        answered_at TEXT
    );
    """,
    # the inline buttons the bot showed, per message (agents/store/shown_buttons.py): a press is honoured only for
    # data the pressed message carried, so a forged callback acts on nothing the bot did not show there
    """
    CREATE TABLE shown_buttons (
        chat_id INTEGER NOT NULL,
        message_id INTEGER NOT NULL,
        data TEXT NOT NULL,
        handed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (chat_id, message_id, data)
    ) WITHOUT ROWID;
    """,
    # base-commit test runs kept for later tasks: a task whose key (commit, test command and `.agentlab.toml`,
    # interpreter, lock files, installed packages) matches a kept outcome reuses it instead of running the suite
    # again; a bounded number per workspace, the least recently used dropped first
    """
    CREATE TABLE base_runs (
        workspace TEXT NOT NULL,
        key TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        command TEXT NOT NULL,
        identity TEXT NOT NULL DEFAULT '{}',
        outcome TEXT NOT NULL,
        created_at TEXT NOT NULL,
        used_at TEXT NOT NULL,
        PRIMARY KEY (workspace, key)
    );
    CREATE INDEX base_runs_commit ON base_runs(workspace, base_commit);
    """,
    # the outside events already acted on (agents/store/seen_events.py): Telegram's update ids and button presses'
    # ids, so an update delivered again (a webhook re-delivery, long polling after a crash or restart) does nothing
    """
    CREATE TABLE seen_events (
        key TEXT PRIMARY KEY,
        seen_at TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX seen_events_age ON seen_events(seen_at);
    """,
    # attempts: N ordinary tasks racing on one request (agents/work/attempts.py); the group holds its one progress
    # message, its state (racing until the one summary is sent) and the pick with the line that says why
    """
    CREATE TABLE attempt_groups (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        size INTEGER NOT NULL,
        title TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'racing',
        first_pass_wins INTEGER NOT NULL DEFAULT 0,
        progress_message_id INTEGER,
        pick_task_id INTEGER,
        why TEXT,
        stopped TEXT,
        created_at TEXT NOT NULL,
        summarised_at TEXT
    );
    ALTER TABLE tasks ADD COLUMN attempt_group INTEGER;
    ALTER TABLE tasks ADD COLUMN attempt INTEGER;
    ALTER TABLE tasks ADD COLUMN attempt_of INTEGER;
    CREATE INDEX tasks_attempt_group ON tasks(attempt_group);
    """,
    # what a finished task's review page shows besides its diff (agents/store/reviews.py): the verdict as the bot
    # judged it (each test's outcome) and the pictures its worker took, kept with the task
    """
    CREATE TABLE task_reviews (
        task_id INTEGER PRIMARY KEY,
        review TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE task_pictures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id INTEGER NOT NULL,
        caption TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'screenshot',
        png BLOB NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX task_pictures_task ON task_pictures(task_id);
    """,
    # the GitHub account each GITHUB_USERS login was first seen as (agents/store/github.py): GitHub lets a login be
    # renamed and the old one claimed by anyone, so a mention by the same login from another account is refused
    """
    CREATE TABLE github_accounts (
        login TEXT PRIMARY KEY,
        account_id INTEGER NOT NULL,
        first_seen_at TEXT NOT NULL
    );
    """,
    # who asked for a proposal (the research task's starter): in a group, members decide and rework their own
    # proposals only; a proposal stored before is its research task's (found by the result that names it)
    """
    ALTER TABLE proposals ADD COLUMN user_id INTEGER;
    UPDATE proposals SET user_id = (
        SELECT t.user_id FROM tasks t WHERE t.worker = 'research' AND t.result = 'proposal #' || proposals.id
        ORDER BY t.id DESC LIMIT 1
    );
    """,
    # the chat messages on their way to an answer (agents/store/open_turns.py): one left at start-up was cut short,
    # and its chat is told
    """
    CREATE TABLE open_turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        asked TEXT NOT NULL,
        started_at TEXT NOT NULL
    );
    """,
    # the proposal a research task reworks (start_research refines=): its new proposal replaces that one, whoever
    # asked for it (an owner reworking a member's proposal leaves no stale copy pending)
    """
    ALTER TABLE tasks ADD COLUMN reworks INTEGER;
    """,
    # messages of a topic that was closed or deleted, posted in the group's general topic instead
    # (agents/store/conversations.py): a press on one of them, or a reply to it, belongs to that topic's conversation
    """
    CREATE TABLE moved_messages (
        chat_id INTEGER NOT NULL,
        message_id INTEGER NOT NULL,
        conversation INTEGER NOT NULL,
        PRIMARY KEY (chat_id, message_id)
    ) WITHOUT ROWID;
    """,
    # updates pushed to the bot (webhook mode), kept from their arrival (agents/store/incoming_updates.py): one a kill
    # caught before it was handled is handled at the next start
    """
    CREATE TABLE incoming_updates (
        update_id INTEGER PRIMARY KEY,
        body TEXT NOT NULL,
        received_at TEXT NOT NULL
    );
    """,
    # what an outbox entry shows in the chat's history (a proposal, a summary): the chat message's id is set on that
    # record whichever path sends it (the flusher too), so a reply to it is known as one
    """
    ALTER TABLE deliveries ADD COLUMN shown_record INTEGER;
    """,
    # groups Telegram upgraded to a supergroup under a new chat id (agents/store/chat_moves.py): what the store kept
    # under the old id is carried to the new one, and a message still addressed to the old id goes to the new one
    """
    CREATE TABLE chat_moves (
        old_chat_id INTEGER PRIMARY KEY,
        new_chat_id INTEGER NOT NULL,
        moved_at TEXT NOT NULL
    );
    """,
    # the owners' decisions on a task's branch under way (agents/store/open_decisions.py): one left at start-up was
    # cut short by a kill, and the task's chat is told what git shows became of the branch
    """
    CREATE TABLE open_decisions (
        task_id INTEGER PRIMARY KEY,
        decision TEXT NOT NULL,
        started_at TEXT NOT NULL
    );
    """,
    # a race's Merge is a decision on record too (agents/work/attempt_decisions.py): the group is `merging` with the
    # attempt chosen from before its merge until the other attempts are discarded, so a kill in between is finished
    # at the next start from what git shows
    """
    ALTER TABLE attempt_groups ADD COLUMN merging_task_id INTEGER;
    """,
]

LATEST_VERSION = len(MIGRATIONS)
