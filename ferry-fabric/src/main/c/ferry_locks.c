/*
 * Spin locks that give the core away (ferry-fabric's LockYield).
 *
 * libfabric 1.17's shm provider guards each process's command queue with a pthread spin lock in
 * shared memory: a sender takes the receiver's lock to write its command, the receiver holds its
 * own while it works through its queue. When a holder is preempted (more runnable threads than
 * cores), every other thread that wants the lock spins for its whole time slice. This file holds
 * a pthread_spin_lock with the same lock word as this libc's that spins briefly and then yields,
 * and a function that points libfabric's own calls to pthread_spin_lock at it (its GOT entry), so
 * no other library's locks change. pthread_spin_init, trylock and unlock stay libc's.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Turns of the pause instruction before a waiter yields (a few microseconds at 256); set once,
 * before the hook, by ferry_set_spin_turns. */
static int spins = 256;

void ferry_set_spin_turns(int turns) {
    spins = turns < 1 ? 1 : turns;
}

/* 1 where this libc's unlocked word is 1 and locking decrements it (x86-64), 0 where unlocked is 0
 * and locking exchanges 1 in (the generic implementation). Set by ferry_hook_spin_lock. */
static int decrementing = -1;

int ferry_spin_lock(pthread_spinlock_t *lock) {
    volatile int *word = (volatile int *) lock;
    for (;;) {
        if (decrementing) {
            if (__atomic_sub_fetch(word, 1, __ATOMIC_ACQUIRE) == 0) {
                return 0;
            }
        } else if (__atomic_exchange_n(word, 1, __ATOMIC_ACQUIRE) == 0) {
            return 0;
        }
        int turns = 0;
        while (decrementing ? *word <= 0 : *word != 0) {
            if (++turns < spins) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#elif defined(__aarch64__)
                __asm__ __volatile__("yield");
#endif
            } else {
                sched_yield();
                turns = 0;
            }
        }
    }
}

struct hook {
    const char *name_part;
    int check; /* 1: count the slots that point at ferry_spin_lock, change nothing */
    int patched;
    int error;
};

/* A dynamic entry's address: relocated in place by the loader on most targets, else relative. */
static uintptr_t address(uintptr_t base, uintptr_t value) {
    return value < base ? base + value : value;
}

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOB_DAT R_AARCH64_GLOB_DAT
#endif

static int patch_slot(uintptr_t slot) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = slot & ~(uintptr_t) (page - 1);
    size_t length = (slot + sizeof(void *) > start + page) ? 2 * page : page;
    /* The slot is read-only once relocated (RELRO): writable for the store, read-only again. */
    if (mprotect((void *) start, length, PROT_READ | PROT_WRITE) != 0) {
        return -errno;
    }
    __atomic_store_n((void **) slot, (void *) ferry_spin_lock, __ATOMIC_RELEASE);
    if (mprotect((void *) start, length, PROT_READ) != 0) {
        return -errno;
    }
    return 1;
}

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void) size;
    struct hook *hook = data;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, hook->name_part) == NULL) {
        return 0;
    }
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *) (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        }
    }
    if (dyn == NULL) {
        return 0;
    }
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const ElfW(Rela) *tables[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symbols = (const ElfW(Sym) *) address(info->dlpi_addr, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strings = (const char *) address(info->dlpi_addr, dyn->d_un.d_ptr); break;
        case DT_JMPREL: tables[0] = (const ElfW(Rela) *) address(info->dlpi_addr, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: sizes[0] = dyn->d_un.d_val; break;
        case DT_RELA: tables[1] = (const ElfW(Rela) *) address(info->dlpi_addr, dyn->d_un.d_ptr); break;
        case DT_RELASZ: sizes[1] = dyn->d_un.d_val; break;
        default: break;
        }
    }
    if (symbols == NULL || strings == NULL) {
        return 0;
    }
    for (int t = 0; t < 2; t++) {
        if (tables[t] == NULL) {
            continue;
        }
        for (size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); i++) {
            const ElfW(Rela) *r = &tables[t][i];
            unsigned type = ELF64_R_TYPE(r->r_info);
            if (type != JUMP_SLOT && type != GLOB_DAT) {
                continue;
            }
            const char *name = strings + symbols[ELF64_R_SYM(r->r_info)].st_name;
            if (strcmp(name, "pthread_spin_lock") != 0) {
                continue;
            }
            uintptr_t slot = info->dlpi_addr + r->r_offset;
            if (hook->check) {
                hook->patched += *(void **) slot == (void *) ferry_spin_lock;
                continue;
            }
            int rc = patch_slot(slot);
            if (rc < 0) {
                hook->error = rc;
                return 1;
            }
            hook->patched += rc;
        }
    }
    return 0;
}

/*
 * Points the calls to pthread_spin_lock of every loaded object whose path contains name_part at
 * ferry_spin_lock. Returns the slots patched (0: no such object or call), or -errno.
 */
int ferry_hook_spin_lock(const char *name_part) {
#if !defined(JUMP_SLOT)
    (void) name_part;
    return -ENOSYS;
#else
    pthread_spinlock_t probe;
    if (pthread_spin_init(&probe, PTHREAD_PROCESS_PRIVATE) != 0) {
        return -EINVAL;
    }
    int unlocked = *(int *) &probe;
    pthread_spin_destroy(&probe);
    if (unlocked != 0 && unlocked != 1) {
        return -ENOTSUP; /* a lock word this file does not know */
    }
    decrementing = unlocked == 1;
    struct hook hook = {name_part, 0, 0, 0};
    dl_iterate_phdr(visit, &hook);
    return hook.error != 0 ? hook.error : hook.patched;
#endif
}

/* The calls to pthread_spin_lock of objects whose path contains name_part that go to ferry_spin_lock. */
int ferry_spin_lock_hooked(const char *name_part) {
#if !defined(JUMP_SLOT)
    (void) name_part;
    return 0;
#else
    struct hook hook = {name_part, 1, 0, 0};
    dl_iterate_phdr(visit, &hook);
    return hook.patched;
#endif
}
