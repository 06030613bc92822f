// The rebac model of authzbench (shared/DESIGN.md) in the Ory Permission Language: the same relations and
// permissions as schema/rebac.zed and schema/rebac.fga. Object ids are the dataset's decimal ints; a user
// is a plain subject id (no User object is ever expanded). membership(g) = members + managers of g and of
// every group below it: a child group is attached as Group:PARENT#child@Group:CHILD and reached by
// `traverse`, as a resource reaches its groups and its organization.
import { Namespace, Context } from "@ory/keto-namespace-types"

class User implements Namespace {}

class Organization implements Namespace {
  related: {
    admin: User[]
    member: User[]
  }
}

class Group implements Namespace {
  related: {
    member: User[]
    manager: User[]
    child: Group[]
  }

  permits = {
    membership: (ctx: Context): boolean =>
      this.related.member.includes(ctx.subject) ||
      this.related.manager.includes(ctx.subject) ||
      this.related.child.traverse((c) => c.permits.membership(ctx)),
  }
}

class Resource implements Namespace {
  related: {
    org: Organization[]
    manager_user: User[]
    manager_group: Group[]
    viewer_user: User[]
    viewer_group: Group[]
  }

  permits = {
    manage: (ctx: Context): boolean =>
      this.related.manager_user.includes(ctx.subject) ||
      this.related.manager_group.traverse((g) => g.permits.membership(ctx)) ||
      this.related.org.traverse((o) => o.related.admin.includes(ctx.subject)),

    view: (ctx: Context): boolean =>
      this.permits.manage(ctx) ||
      this.related.viewer_user.includes(ctx.subject) ||
      this.related.viewer_group.traverse((g) => g.permits.membership(ctx)),
  }
}
